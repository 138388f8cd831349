"""End to end: transformers writes the golden suite from the HF checkpoint,
the Linux serial_runner serves the converted image on a TCP port, and
`colibri-test run` must pass; and it must fail, clearly, when the weights are
corrupted, the model is another one, or the answers are wrong."""
from __future__ import annotations

import json
import subprocess
import zlib
from xml.etree import ElementTree as ET

import numpy as np
import pytest
from colibri_tools.protocol import SerialClient
from colibri_tools.testing.golden import load_suite, save_suite
from colibri_tools.testing.suite_runner import main as colibri_test


def run_cli(capsys, *args) -> tuple[int, str]:
    code = colibri_test(list(args))
    return code, capsys.readouterr().out


def junit(path) -> ET.Element:
    return ET.parse(path).getroot().find("testsuite")


def test_suite_passes(runner, suite_file, tmp_path, capsys):
    code, out = run_cli(capsys, "run", "--port", runner.url, str(suite_file),
                        "--junit", str(tmp_path / "j.xml"), "--timeout", "10")
    assert code == 0, out
    assert "4 passed, 0 failed" in out and "FAIL" not in out
    assert "board test-board" in out and "weights verified" in out
    for line in [text for text in out.splitlines() if text.startswith("case")][1:]:
        name, result, diff, tokens, per_token = line.split()
        assert result == "PASS" and float(diff) <= 1e-4 and int(per_token) > 0
        assert tokens in ("8/8", "12/12")
    suite = junit(tmp_path / "j.xml")
    assert (suite.get("tests"), suite.get("failures")) == ("5", "0")


def test_golden_comes_from_transformers(tiny, suite_file):
    """The suite's tokens are transformers' generate() (the golden tests'
    reference call), not something the code under test produced."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny["hf"]), dtype=torch.float32,
                                                 experts_implementation="eager").eval()
    case = load_suite(suite_file).cases[-1]
    assert (case.ids, case.gen) == ([5, 6, 7], 12)
    with torch.no_grad():
        out = model.generate(torch.tensor([case.ids]), max_new_tokens=12, min_new_tokens=12,
                             do_sample=False, pad_token_id=0, eos_token_id=None)
        logits = model(torch.tensor([case.ids])).logits[0, -1].numpy()
    assert out[0, 3:].tolist() == case.tokens
    assert np.abs(logits - case.logits).max() < 1e-5


def test_wrong_answers_fail(runner, suite_file, tmp_path, capsys):
    suite = load_suite(suite_file)
    suite.cases[0].logits = suite.cases[0].logits.copy()
    suite.cases[0].logits[3] += 1e-3
    suite.cases[1].tokens[4] = (suite.cases[1].tokens[4] + 1) % 97
    bad = save_suite(suite, tmp_path / "bad.json")
    code, out = run_cli(capsys, "run", "--port", runner.url, str(bad), "--junit",
                        str(tmp_path / "j.xml"))
    assert code == 1
    assert "2 passed, 2 failed" in out
    assert "case0: max |logit diff| " in out and "> 0.0001 (at id 3:" in out
    assert "case1: tokens differ from token 4" in out
    assert junit(tmp_path / "j.xml").get("failures") == "2"


def test_corrupted_weights_are_reported_as_such(start_runner, corrupted, suite_file, tmp_path,
                                                capsys):
    image, tensor = corrupted
    runner = start_runner(image)
    code, out = run_cli(capsys, "run", "--port", runner.url, str(suite_file), "--junit",
                        str(tmp_path / "j.xml"))
    assert code == 1
    assert f"FAILED: weights corrupted: tensor {tensor}" in out
    assert "0 passed, 4 failed" in out
    suite = junit(tmp_path / "j.xml")
    check = suite.find("testcase[@name='device-check']/failure")
    assert check is not None and f"tensor {tensor}" in check.get("message")
    with SerialClient.open(runner.url, timeout=5) as client:
        client.connect()
        assert client.command("verify")[-1] == (
            f"error: colibri status 5 (checksum mismatch: image corrupted): weights corrupted: "
            f"tensor {tensor}")


def test_another_model_is_refused(start_runner, tiny, suite_file, capsys):
    runner = start_runner(tiny["image"], "--fingerprint", "0x12345678")
    code, out = run_cli(capsys, "run", "--port", runner.url, str(suite_file))
    assert code == 1 and "COLIBRI_E_CONFIG_MISMATCH (10)" in out and "another model" in out
    with SerialClient.open(runner.url, timeout=5) as client:
        info = client.connect()
        assert info.init_status == 10 and info.expected_fingerprint == 0x12345678
        assert client.forward([1]).status == 10
        assert client.command("info")[-1].startswith("error: colibri status 10")


def test_fingerprint_mismatch(runner, suite_file, capsys):
    code, out = run_cli(capsys, "run", "--port", runner.url, str(suite_file), "--fingerprint",
                        "0xDEADBEEF")
    assert code == 1 and "model fingerprint mismatch" in out and "0xDEADBEEF" in out


def test_no_device(suite_file, tmp_path, capsys):
    code, out = run_cli(capsys, "run", "--port", "socket://127.0.0.1:9", str(suite_file),
                        "--connect-timeout", "0.2", "--junit", str(tmp_path / "j.xml"))
    assert code == 3 and "cannot open the port" in out      # could not run: an error
    suite = junit(tmp_path / "j.xml")
    assert (suite.get("failures"), suite.get("errors")) == ("0", "5")


def test_digest_equals_the_reference_engine(client, tiny, host_run_bin, tmp_path):
    """Cross-target equality: the runner's logits digest is the CRC-32 of the
    logits colibri-run (Linux build of the same core) writes."""
    ids = [4, 8, 15, 16, 23, 42]
    client.reset()
    result = client.forward(ids, top_k=4)
    path = tmp_path / "logits.f32"
    subprocess.run([str(host_run_bin), str(tiny["image"]), "--ids", ",".join(map(str, ids)),
                    "--all-logits", str(path)], check=True, capture_output=True, timeout=60)
    last = path.read_bytes()[-97 * 4:]
    assert result.logits_crc == zlib.crc32(last)
    assert client.read_logits() == last
    values = np.frombuffer(last, dtype="<f4")
    assert [i for i, _ in result.top] == list(np.argsort(-values, kind="stable")[:4])


def test_forward_in_interrupt_is_bit_identical(client):
    client.reset()
    plain = client.forward([7, 8, 9])
    client.reset()
    in_isr = client.forward([7, 8, 9], in_interrupt=True)
    assert in_isr.ran_in_interrupt and not plain.ran_in_interrupt
    assert in_isr.logits_crc == plain.logits_crc and in_isr.status == 0
    assert 0 < in_isr.isr_stack_bytes < 512 * 1024


def test_digests_across_runs(runner, suite_file, tmp_path, capsys):
    saved = tmp_path / "digests.json"
    assert run_cli(capsys, "run", "--port", runner.url, str(suite_file), "--save-digests",
                   str(saved))[0] == 0
    assert run_cli(capsys, "run", "--port", runner.url, str(suite_file), "--expect-digests",
                   str(saved))[0] == 0
    recorded = json.loads(saved.read_text())
    recorded["case1"] = "0x00000000"
    saved.write_text(json.dumps(recorded))
    code, out = run_cli(capsys, "run", "--port", runner.url, str(suite_file), "--expect-digests",
                        str(saved))
    assert code == 1 and "case1: logits not bit-identical" in out


def test_line_mode(client, suite_file):
    case = load_suite(suite_file).cases[-1]
    assert client.command("help")[-1] == "ok"
    assert any(text.startswith("  gen ID ID ... / N") for text in client.command("help"))
    assert client.command("reset") == ["ok: position 0"]
    gen = client.command("gen " + " ".join(map(str, case.ids)) + " / 12")
    assert gen[0] == "tokens: " + " ".join(map(str, case.tokens))
    assert gen[1].startswith("ok: 12 tokens, position 14, ticks ")
    info = client.command("info")
    assert "state: context 128, position 14" in info and info[-1] == "ok"
    assert client.command("  verify")[-1].startswith("ok: every tensor's CRC-32 matches")
    assert client.command("reset")[-1] == "ok: position 0"
    client.reset()
    assert tuple(case.tokens) == client.generate(case.ids, 12).tokens


@pytest.mark.parametrize("line, answer", [
    ("bogus", "error: unknown command (try help)"),
    ("gen", "error: usage: gen ID ID ... / N (decimal ids, then N)"),
    ("gen 1 2 x", "error: usage: gen ID ID ... / N (decimal ids, then N)"),
    ("gen 1 / 1001", "error: after '/' give the number of tokens, 0 to 1000"),
    ("gen 97 / 1", "error: colibri status 11 (token id out of range of the vocabulary)"),
    ("x" * 200 + "y", "error: line longer than 200 characters"),
])
def test_line_mode_errors(client, line, answer):
    client.command("reset")
    if len(line) > 200:
        client.send_raw(line.encode() + b"\n")
        assert client.command("help")[0] == answer
    else:
        assert client.command(line)[-1] == answer


def test_stdio_transport(runner_bin, tiny):
    from colibri_tools.protocol import Frame, Info, Msg, StreamDecoder, TextLine, encode_frame

    done = subprocess.run([str(runner_bin), str(tiny["image"]), "--stdio"],
                          input=b"info\r\n" + encode_frame(Msg.HELLO, 5), capture_output=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    events = StreamDecoder().feed(done.stdout)
    assert [e.text for e in events if isinstance(e, TextLine)][-1] == "ok"
    [frame] = [e for e in events if isinstance(e, Frame)]
    assert Info.unpack(frame.payload).vocab_size == 97


def test_pty_transport(runner_bin, tiny):
    proc = subprocess.Popen([str(runner_bin), str(tiny["image"]), "--pty"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("pty /dev/"), line
        with SerialClient.open(line.split()[1], timeout=5) as client:
            assert client.connect().vocab_size == 97
            client.reset()
            assert client.forward([1, 2, 3]).status == 0
            assert len(client.read_logits()) == 97 * 4
    finally:
        proc.terminate()
        proc.wait(timeout=10)
