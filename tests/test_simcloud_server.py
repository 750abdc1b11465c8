"""The emulators' HTTP server: a client that goes away mid-answer is not an error it prints."""

from __future__ import annotations

import socket

import pytest

from tpu_trainer.simcloud.server import serve_on_loopback

pytestmark = pytest.mark.unit


def test_a_client_gone_before_its_answer_is_quiet_and_a_bug_is_still_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = serve_on_loopback(lambda _h: None)
    request = socket.socket()  # what the server was handling: only named in the message
    try:
        for error in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")):
            try:
                raise error
            except ConnectionError:
                server.handle_error(request, ("127.0.0.1", 1))
        try:
            raise ValueError("a bug in an answer")
        except ValueError:
            server.handle_error(request, ("127.0.0.1", 1))
    finally:
        request.close()
        server.shutdown()
    err = capsys.readouterr().err
    assert "Broken pipe" not in err and "reset" not in err
    assert "ValueError: a bug in an answer" in err
