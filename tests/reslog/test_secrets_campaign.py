"""Issue 36's campaign, in the suite: 47 secrets of varied shapes planted where a training run
puts text (the config, the command line, env-like arguments, logged strings, alerts, a config
update, a failure's traceback, a stall's stack with its source lines), in one real process
writing a real SQLite store. Not one of them may be anywhere in the store's bytes.

The 35 shapes redacted before issue 36 (those the other redaction tests cover) and the 12 the
campaign found stored: `--auth_header 'Bearer X'`, `--header Authorization:X`, the config keys
`ssh_pass`, `creds`, `bearer`, `cookie`, `session_id`, a list `["--token", "X"]`, a Slack
webhook URL (and a Discord and a generic one), and `token = "X"` in a stall stack's source.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from reslog.redact import redact, redact_text
from reslog.training.hostinfo import command_line
from tests.fixtures.logging_child import ROOT
from tests.reslog.test_reslog_api import read_run

# name -> the secret; each is unique and appears in the child's script exactly where the
# name says.
SECRETS = {
    # config keys that look secret
    "config token": "cfgTok0001zz",
    "config secret_token": "cfgSecTok0002",
    "config hub_token": "cfgHubTok0003",
    "config HF_TOKEN": "cfgHfEnv0004",
    "config nested api_key": "cfgApiKey0005",
    "config nested password": "cfgPassword0006",
    "config wandb_key": "cfgWandbKey0007",
    "config openai_key": "cfgOpenaiKey0008",
    "config credentials dict": "cfgCredentials0009",
    "config passphrase": "cfgPassphrase0010",
    "config privateKey": "cfgPrivateKey0011",
    "config clientSecret": "cfgClientSecret0012",
    # text inside config values
    "config url password": "cfgUrlPw0013",
    "config list url password": "cfgListUrlPw0014",
    "config query token": "cfgQueryTok0015",
    "config Authorization Bearer": "cfgBearerHdr0016",
    "config github pat shape": "ghp_" + "A" * 36,
    "config hf shape": "hf_" + "B" * 34,
    "config sk shape": "sk-" + "C" * 40,
    "config slack token shape": "xoxb-" + "1234567890-abcdefDEF",
    "config AWS key id": "AKIA" + "ABCDEFGHIJKLMNOP",
    "config Basic auth": "dXNlcjpwYXNzd29yZA==",
    "config presigned signature": "cfgAmzSig0023",
    # the campaign's 12
    "config ssh_pass": "cfgSshPass0024",
    "config creds": "cfgCreds0025",
    "config bearer": "cfgBearerKey0026",
    "config cookie": "cfgCookie0027",
    "config session_id": "cfgSessionId0028",
    "config list --token": "cfgListToken0029",
    "config slack webhook": "cfgSlackHook0030",
    "config discord webhook": "cfgDiscordHook0031",
    "config generic hooks URL": "cfgGenericHook0032",
    "argv --auth_header Bearer": "argvAuthHdr0033",
    "argv --header Authorization": "argvHeader0034",
    "stall source line token =": "stallSrcTok0035",
    # the command line
    "argv -p": "argvPflag0036",
    "argv --key": "argvKeyFlag0037",
    "argv --github_pat": "argvPatFlag0038",
    "argv --wandb-key=": "argvWandbKey0039",
    "argv env-like HF_TOKEN=": "argvEnvTok0040",
    "argv url password": "argvUrlPw0041",
    # events
    "logged string curl Bearer": "logBearer0042",
    "alert api_key=": "alertApiKey0043",
    "config update hf_token": "updHfTok0044",
    "traceback url password": "excUrlPw0045",
    "traceback github pat": "ghp_" + "D" * 36,
    "stall source line password str": "stallSrcPw0047",
}

CHILD = """
import sys, time, reslog

def wait_for_server(*_args):  # stands for a request that never returns
    time.sleep(3)

def upload(seconds):
    token = "{stall source line token =}"; wait_for_server(token)

class Client:
    def connect(self):
        password: str = '{stall source line password str}'; upload(password)

run = reslog.init(store=sys.argv[-1], name="leaky", system=False, flush_interval=0.1,
                  stall_after=1.0, config={{
    "token": "{config token}", "secret_token": "{config secret_token}",
    "hub_token": "{config hub_token}", "HF_TOKEN": "{config HF_TOKEN}",
    "wandb": {{"api_key": "{config nested api_key}", "project": "z"}},
    "db": {{"password": "{config nested password}", "host": "db.internal"}},
    "wandb_key": "{config wandb_key}", "openai_key": "{config openai_key}",
    "credentials": {{"aws": "{config credentials dict}"}},
    "passphrase": "{config passphrase}", "privateKey": "{config privateKey}",
    "clientSecret": "{config clientSecret}",
    "store_url": "postgresql://trainer:{config url password}@db.internal:5432/runs",
    "mirrors": ["https://bot:{config list url password}@hub.example/x", "https://hub.example/y"],
    "endpoint": "https://hub.example/api?token={config query token}&page=1",
    "headers": "Authorization: Bearer {config Authorization Bearer}",
    "notes": "pushed with {config github pat shape} to the hub as {config hf shape}",
    "eval_cmd": "OPENAI={config sk shape} python eval.py",
    "alerts_via": "{config slack token shape}", "aws_id": "{config AWS key id}",
    "curl": "curl -H 'Authorization: Basic {config Basic auth}' https://x",
    "ckpt_url": "https://s3.example/b/c.pt?X-Amz-Signature={config presigned signature}&x=1",
    "ssh_pass": "{config ssh_pass}", "creds": "{config creds}", "bearer": "{config bearer}",
    "cookie": "{config cookie}", "session_id": "{config session_id}",
    "launcher_args": ["--nodes", 2, "--token", "{config list --token}"],
    "notify": "https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/{config slack webhook}",
    "discord": "https://discord.com/api/webhooks/123456789/{config discord webhook}",
    "on_done": "https://ci.example.org/api/hooks/{config generic hooks URL}",
    "lr": 3e-4, "batch_tokens": 524288, "pad_token": "<pad>", "forward_pass": "fused",
}})
for step in range(5):
    run.log({{"loss": 1.0 / (step + 1)}})
run.log({{"note": "curl -H 'Authorization: Bearer {logged string curl Bearer}' https://api"}})
run.alert("upload failed: https://s3/bucket?api_key={alert api_key=}")
run.config.update({{"hf_token": "{config update hf_token}", "warmup": 100}})
time.sleep(0.5)
Client().connect()  # hangs past stall_after: the stall event holds every thread's stack
run.log({{"loss": 0.1}})
time.sleep(0.5)
raise RuntimeError("cannot reach postgresql://me:{traceback url password}@db/runs with "
                   "{traceback github pat}")
"""

ARGV = [
    "-p",
    SECRETS["argv -p"],
    "--key",
    SECRETS["argv --key"],
    "--github_pat",
    SECRETS["argv --github_pat"],
    f"--wandb-key={SECRETS['argv --wandb-key=']}",
    f"HF_TOKEN={SECRETS['argv env-like HF_TOKEN=']}",
    "--db",
    f"postgresql://me:{SECRETS['argv url password']}@db/runs",
    "--auth_header",
    f"Bearer {SECRETS['argv --auth_header Bearer']}",
    "--header",
    f"Authorization:{SECRETS['argv --header Authorization']}",
    "--lr",
    "3e-4",
]


@pytest.mark.integration
def test_47_planted_secrets_none_stored(tmp_path):
    assert len(SECRETS) == 47 and len(set(SECRETS.values())) == 47
    script = tmp_path / "train.py"
    script.write_text(CHILD.format(**SECRETS))
    store = tmp_path / "runs" / "reslog.db"
    done = subprocess.run(
        [sys.executable, str(script), *ARGV, str(store)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 1 and "RuntimeError" in done.stderr, done.stderr[-2000:]
    meta, series, events = read_run(store)
    # What was planted did arrive: the run, its stall with the stack, its failure, its config.
    assert meta.status == "failed" and len(series["loss"]) == 6
    stalls = [e for e in events if e.kind == "stall" and e.level == "warning"]
    assert stalls and "in upload" in stalls[0].body and 'token = "<redacted>"' in stalls[0].body
    assert "password: str = '<redacted>'" in stalls[0].body
    assert meta.config["lr"] == 3e-4 and meta.config["pad_token"] == "<pad>"
    assert meta.config["forward_pass"] == "fused" and meta.config["batch_tokens"] == 524288
    assert meta.config["launcher_args"] == ["--nodes", 2, "--token", "<redacted>"]
    assert "--lr 3e-4" in meta.command and "--auth_header '<redacted>'" in meta.command
    data = b"".join(p.read_bytes() for p in store.parent.iterdir() if p.is_file())
    assert b"leaky" in data
    stored = [what for what, secret in SECRETS.items() if secret.encode() in data]
    assert stored == [], f"{len(stored)} of 47 secrets stored: {stored}"


# Each rule alone, on the shapes above and the text around them that must stay.
@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ('    token = "abc123"; wait(token)', '    token = "<redacted>"; wait(token)'),
        ("self.password = 'pw'", "self.password = '<redacted>'"),
        ('api_key: str = "kk"', 'api_key: str = "<redacted>"'),
        ('{"session_id": "s1", "lr": 0.1}', '{"session_id": "<redacted>", "lr": 0.1}'),
        ('os.environ["HF_TOKEN"] = "abc"', 'os.environ["HF_TOKEN"] = "<redacted>"'),
        ("--header Authorization:xyz", "--header Authorization:<redacted>"),
        ("-H 'Authorization: token abc'", "-H 'Authorization: token <redacted>'"),
        ("X-Api-Key: abc", "X-Api-Key: <redacted>"),
        ("Cookie: a=b; c=d", "Cookie: <redacted>"),
        ("Bearer abc", "Bearer <redacted>"),
        ("curl -u basic dXNlcjpwYXNz", "curl -u basic <redacted>"),
        ("https://hooks.slack.com/services/T0/B0/sec", "https://hooks.slack.com/<redacted>"),
        ("https://discord.com/api/webhooks/1/s x", "https://discord.com/api/webhooks/<redacted> x"),
        ("ssh_pass: hunter2", "ssh_pass: <redacted>"),
        # stays as it is
        ("loss: 0.5 step=3 at 12:30", "loss: 0.5 step=3 at 12:30"),
        ('File "/x/train.py", line 3, in upload', 'File "/x/train.py", line 3, in upload'),
        ("KeyError: 'token'", "KeyError: 'token'"),
        ("basic training of a Basic Transformer", "basic training of a Basic Transformer"),
        ("forward_pass: fused, pad_token: <pad>", "forward_pass: fused, pad_token: <pad>"),
        ("https://example.com/services/x", "https://example.com/services/x"),
        ("Authorization: Bearer <redacted>", "Authorization: Bearer <redacted>"),
    ],
)
def test_each_rule_redacts_its_shape_and_keeps_the_rest(text, kept):
    assert redact_text(text) == kept
    assert redact_text(kept) == kept  # redacting twice changes nothing


def test_secret_key_names_and_option_lists():
    config = {
        "ssh_pass": "a",
        "db_pass": "b",
        "creds": "c",
        "bearer": "d",
        "cookie": "e",
        "session_id": "f",
        "sessionId": "g",
        "auth_header": "h",
        "jwt": "i",
        "forward_pass": 2,
        "num_pass": 3,
        "session_name": "run",
        "cookie_jar_size": 4,
        "args": ["--token", "x", "--lr", 0.1, "-p", 9, "--token=y"],
    }
    out = redact(config)
    hidden = {k for k, v in out.items() if v == "<redacted>"}
    assert hidden == {
        "ssh_pass",
        "db_pass",
        "creds",
        "bearer",
        "cookie",
        "session_id",
        "sessionId",
        "auth_header",
        "jwt",
    }
    assert out["args"] == [
        "--token",
        "<redacted>",
        "--lr",
        0.1,
        "-p",
        "<redacted>",
        "--token=<redacted>",
    ]
    line = command_line(["t.py", "--auth_header", "Bearer X", "--header", "Authorization:Y"])
    assert line == "t.py --auth_header '<redacted>' --header 'Authorization:<redacted>'"
