"""Commands: attached over the exec WebSocket, and in the background."""

from __future__ import annotations

import hashlib
import io
import threading
import time

import pytest

import den


def test_exit_codes_and_both_streams(client, sb):
    r = client.exec(sb.name, ["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.exit_code, r.status, r.ok) == (3, "exited", False)
    assert r.stdout == b"out\n" and r.stderr == b"err\n"
    assert r.run.id and r.run.argv == ["sh", "-c", "echo out; echo err >&2; exit 3"]

    ok = client.exec(sb.name, ["true"])
    assert ok.exit_code == 0 and ok.ok

    killed = client.exec(sb.name, "kill -9 $$")
    assert killed.status == "killed" and killed.exit_code is None and killed.run.signal == "KILL"

    # A command that cannot start is an error, not an exit code.
    with pytest.raises(den.NotFound) as e:
        client.exec(sb.name, ["/no/such/program"])
    assert "/no/such/program" in e.value.message


def test_env_cwd_user(client, sb):
    r = client.exec(sb.name, "echo $A-$B; pwd; id -u", env={"A": "1", "B": "two"}, cwd="/tmp", user="65534")
    assert r.stdout_text.split() == ["1-two", "/tmp", "65534"]


def test_output_goes_to_callbacks_and_files(client, sb):
    chunks, errbuf = [], io.BytesIO()
    started = []
    r = client.exec(sb.name, "echo one; echo two >&2; echo three", stdout=chunks.append, stderr=errbuf,
                    on_start=started.append)
    assert b"".join(chunks) == b"one\nthree\n" and errbuf.getvalue() == b"two\n"
    assert r.stdout == b"" and r.stderr == b""  # streamed, not captured
    assert started and started[0].id == r.run.id and started[0].status == "running"

    text = io.StringIO()
    client.exec(sb.name, ["printf", "h\\303\\251llo"], stdout=text)
    assert text.getvalue() == "héllo"


def test_stdin_in_all_its_forms(client, sb):
    assert client.exec(sb.name, ["cat"], stdin=b"bytes\n").stdout == b"bytes\n"
    assert client.exec(sb.name, ["cat"], stdin="text é\n").stdout == "text é\n".encode()
    assert client.exec(sb.name, ["cat"], stdin=io.BytesIO(b"file\n")).stdout == b"file\n"
    assert client.exec(sb.name, ["cat"], stdin=(b"%d," % i for i in range(5))).stdout == b"0,1,2,3,4,"
    # EOF reaches the command even with nothing to send.
    assert client.exec(sb.name, ["wc", "-c"], stdin=b"").stdout.strip() == b"0"


def test_large_stdin_and_output_both_ways_at_once(client, sb):
    data = bytes(range(256)) * (16 << 10)  # 4 MiB, through cat and back
    r = client.exec(sb.name, ["cat"], stdin=data)
    assert len(r.stdout) == len(data) and hashlib.sha256(r.stdout).digest() == hashlib.sha256(data).digest()


def test_large_output(client, sb):
    size = 24 << 20
    total = [0]
    h = hashlib.sha256()

    def take(b):
        total[0] += len(b)
        h.update(b)

    r = client.exec(sb.name, f"head -c {size} /dev/zero; echo tail >&2", stdout=take)
    assert r.ok and total[0] == size and r.stderr == b"tail\n"
    assert h.digest() == hashlib.sha256(bytes(size)).digest()
    assert r.run.stdout_bytes == size


def test_timeout_kills_the_command(client, sb):
    t = time.monotonic()
    r = client.exec(sb.name, ["sleep", "30"], timeout="1s")
    assert r.status == "timed_out" and not r.ok
    assert time.monotonic() - t < 20
    r = client.exec(sb.name, ["sleep", "30"], timeout=0.5)  # seconds
    assert r.status == "timed_out"


def test_stream_iterates_and_takes_stdin_and_signals(client, sb):
    with client.exec_stream(sb.name, "while read l; do echo got:$l; done; echo bye >&2", stdin=True) as st:
        st.write_stdin(b"a\n")
        it = iter(st)
        assert next(it) == ("stdout", b"got:a\n")
        st.write_stdin("b\n")
        assert next(it) == ("stdout", b"got:b\n")
        st.close_stdin()
        rest = list(it)
    assert rest == [("stderr", b"bye\n")]
    assert st.result.exit_code == 0 and st.started.id == st.result.id

    with client.exec_stream(sb.name, "trap 'echo caught; exit 7' INT; echo ready; while :; do sleep 0.1; done") as st:
        it = iter(st)
        assert next(it) == ("stdout", b"ready\n")
        st.signal("INT")
        assert list(it) == [("stdout", b"caught\n")]
    assert st.result.exit_code == 7


def test_tty(client, sb):
    with client.exec_stream(sb.name, ["sh", "-c", "stty size; tty"], tty=True, rows=30, cols=100) as st:
        r = st.wait()
    assert r.ok and r.stdout.split()[:2] == [b"30", b"100"] and b"/dev/" in r.stdout


def test_background_run_and_its_logs(client, sb):
    run = client.exec_detached(sb.name, "for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.3; done; exit 4")
    assert run.detached and run.status == "running" and run.id

    # Follow to the end: the output as it comes, then the run's end.
    chunks = []
    with client.logs(sb.name, run.id, follow=True) as lg:
        for c in lg:
            chunks.append(c)
    assert b"".join(chunks) == b"out1\nout2\nout3\n" and lg.ended and lg.offset == 15
    done = client.get_run(sb.name, run.id)
    assert (done.status, done.exit_code, done.stdout_bytes, done.stderr_bytes) == ("exited", 4, 15, 15)

    assert client.logs(sb.name, run.id, stream="stderr").read() == b"err1\nerr2\nerr3\n"
    assert client.logs(sb.name, run.id, offset=5).read() == b"out2\nout3\n"
    assert run.id in [r.id for r in client.runs(sb.name)]
    assert [r.id for r in client.runs(sb.name, limit=1)] == [run.id]


def test_signal_a_background_run(client, sb):
    run = client.exec_detached(sb.name, ["sleep", "60"])
    client.signal(sb.name, run.id, "KILL")
    with client.logs(sb.name, run.id, follow=True) as lg:
        lg.read()
    r = client.get_run(sb.name, run.id)
    assert r.status == "killed" and r.signal == "KILL"


def test_follow_stopped_raises_follow_error(client, sb):
    run = client.exec_detached(sb.name, "echo before; sleep 5; echo after")
    got = bytearray()
    with pytest.raises(den.FollowError) as e:
        with client.logs(sb.name, run.id, follow=True) as lg:
            for c in lg:
                got += c
                if bytes(got) == b"before\n":
                    threading.Thread(target=client.pause, args=(sb.name,), daemon=True).start()
    err = e.value
    assert err.offset == 7 and err.run == run.id and err.stream == "stdout" and err.hint
    # Resume from where it stopped: following wakes the sandbox.
    with client.logs(sb.name, run.id, offset=err.offset, follow=True) as lg:
        assert lg.read() == b"after\n" and lg.ended
