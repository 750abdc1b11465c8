"""Numbered schema migrations of the run store. Append only: never edit a released step."""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    # 1: runs, their stages, every command, every resource, every capacity attempt
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        finished_at REAL,
        model TEXT NOT NULL,
        request TEXT NOT NULL,
        launcher TEXT NOT NULL,
        device_type TEXT NOT NULL,
        precision TEXT NOT NULL,
        status TEXT NOT NULL,
        pid INTEGER,
        host TEXT,
        project TEXT,
        cluster TEXT,
        region TEXT,
        zone TEXT,
        error TEXT,
        plan_json TEXT,
        pools_before TEXT
    );
    CREATE TABLE stages (
        run_id TEXT NOT NULL REFERENCES runs(id),
        name TEXT NOT NULL,
        status TEXT NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL,
        detail TEXT,
        PRIMARY KEY (run_id, name)
    );
    CREATE TABLE commands (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT REFERENCES runs(id),
        argv TEXT NOT NULL,
        exit_code INTEGER NOT NULL,
        ran INTEGER NOT NULL,
        started_at REAL NOT NULL,
        seconds REAL NOT NULL,
        stdout_tail TEXT,
        stderr_tail TEXT
    );
    CREATE INDEX commands_run ON commands(run_id);
    CREATE TABLE resources (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(id),
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        project TEXT NOT NULL,
        location TEXT NOT NULL,
        cluster TEXT,
        state TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        detail TEXT
    );
    CREATE INDEX resources_run ON resources(run_id);
    CREATE TABLE capacity_attempts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(id),
        at REAL NOT NULL,
        reservation TEXT NOT NULL,
        zone TEXT,
        status TEXT,
        free_hosts INTEGER,
        needed_hosts INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        message TEXT
    );
    """,
    # 2: per-step metrics of a run, and its summary
    """
    CREATE TABLE steps (
        run_id TEXT NOT NULL REFERENCES runs(id),
        step INTEGER NOT NULL,
        seconds REAL,
        tflops_device REAL,
        tokens_device REAL,
        total_weights REAL,
        loss REAL,
        extra TEXT,
        PRIMARY KEY (run_id, step)
    );
    ALTER TABLE runs ADD COLUMN metrics_json TEXT;
    """,
    # 3: whether a run was real or a rehearsal on the fake cloud
    """
    ALTER TABLE runs ADD COLUMN mode TEXT NOT NULL DEFAULT 'real';
    """,
    # 4: what a run was expected to take and cost, recorded before capacity was asked for
    """
    CREATE TABLE estimates (
        run_id TEXT PRIMARY KEY,
        at REAL NOT NULL,
        estimate_json TEXT NOT NULL
    );
    """,
    # 5: the segments of a run: each attempt on capacity, why it ended and what that cost
    """
    CREATE TABLE segments (
        run_id TEXT NOT NULL REFERENCES runs(id),
        n INTEGER NOT NULL,
        zone TEXT,
        started_at REAL NOT NULL,
        first_step_at REAL,
        ended_at REAL,
        cause TEXT,
        last_step INTEGER,
        durable_step INTEGER,
        restored_step INTEGER,
        wasted_steps INTEGER,
        recovery_s REAL,
        PRIMARY KEY (run_id, n)
    );
    """,
)
