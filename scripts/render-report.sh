#!/usr/bin/env bash
# Renders an HTML page in headless Chromium and writes what a reader would see.
#
# Usage: scripts/render-report.sh PAGE[#FRAGMENT] PNG [--dom FILE] [--console FILE]
#                                 [--width W] [--height H] [--timeout SECONDS]
#
#   PAGE       an HTML file; a `#fragment` is passed to the page (e.g. `report.html#only=chart-3`)
#   PNG        the screenshot: W pixels wide (default 1280), as tall as the whole page unless
#              --height H is given (then exactly H)
#   --dom      the document after its scripts ran (doctype and <html> element), as HTML
#   --console  every console message, uncaught exception and browser log entry of the page, one
#              per line: `LEVEL SOURCE: TEXT (URL:LINE)`, LEVEL one of error, warning, info,
#              debug; SOURCE `console.<type>`, `uncaught` or `log.<source>` (e.g. `log.network`
#              for a resource that failed to load). Newlines inside a message are written `\n`.
#
# Chromium runs as its own process group with a throwaway profile (removed on exit, also on
# failure and Ctrl-C), without its sandbox (we run as root), with its background fetches turned
# off and every network request of the page sent to a closed loopback port: a self-contained
# page needs none, and one that tries shows it as an error in --console.
#
# The page is driven over the DevTools protocol on a pipe (--remote-debugging-pipe) by the small
# Python program below, because the plain `--dump-dom`/`--screenshot` switches cannot say which
# console lines were errors (Chromium logs every page message at INFO) nor measure the page's
# height before the screenshot.
#
# CHROMIUM, if set, names the browser to run instead of the `chromium` on PATH.
#
# Exit status: 0 when everything asked for was written (even if the page logged errors: read
# --console); 1 when Chromium or python3 is missing, the page is missing, Chromium fails or the
# page does not finish loading within the timeout (default 60 s). One line on stderr says why.
set -euo pipefail

die() {
    printf 'render-report: %s\n' "$*" >&2
    exit 1
}

usage="usage: scripts/render-report.sh PAGE[#FRAGMENT] PNG [--dom FILE] [--console FILE] [--width W] [--height H] [--timeout SECONDS]"
page="" png="" dom="" console="" width=1280 height=0 limit=60
positional=()
while (($#)); do
    case "$1" in
    --dom | --console | --width | --height | --timeout)
        (($# >= 2)) || die "$1 needs a value; $usage"
        case "$1" in
        --dom) dom=$2 ;;
        --console) console=$2 ;;
        --width) width=$2 ;;
        --height) height=$2 ;;
        --timeout) limit=$2 ;;
        esac
        shift 2
        ;;
    -h | --help)
        printf '%s\n' "$usage"
        exit 0
        ;;
    -*) die "unknown option '$1'; $usage" ;;
    *)
        positional+=("$1")
        shift
        ;;
    esac
done
((${#positional[@]} == 2)) || die "$usage"
page=${positional[0]} png=${positional[1]}
for n in "$width" "$height" "$limit"; do
    [[ $n =~ ^[0-9]+$ ]] || die "'$n' is not a whole number; $usage"
done
((width >= 16 && width <= 8192)) || die "--width $width is outside 16..8192"
((height == 0 || (height >= 16 && height <= 16384))) || die "--height $height is outside 16..16384"
((limit >= 1)) || die "--timeout must be at least 1 second"

fragment=""
if [[ ! -e $page && $page == *"#"* ]]; then
    fragment=${page#*#}
    page=${page%%#*}
fi
[[ -f $page ]] || die "page '$page' not found"

if [[ -n ${CHROMIUM:-} ]]; then
    chrome=$(command -v "$CHROMIUM" || true)
    [[ -n $chrome ]] || die "chromium not found at CHROMIUM=$CHROMIUM: unset it or run scripts/setup.sh"
else
    chrome=$(command -v chromium || command -v chromium-browser || true)
    [[ -n $chrome ]] || die "chromium not found: run scripts/setup.sh"
fi
command -v python3 >/dev/null 2>&1 || die "python3 not found: run scripts/setup.sh"

profile=$(mktemp -d "${TMPDIR:-/tmp}/render-report.XXXXXX")
trap 'rm -rf "$profile" 2>/dev/null || { sleep 1; rm -rf "$profile"; }' EXIT

# The driver runs in the background so that a signal to this script is handled at once (bash
# defers traps until a foreground command ends): it is passed on, and the driver stops the
# Chromium it started. The driver keeps its own deadline; `timeout` is only the backstop.
timeout -k 5 $((limit + 15)) python3 - "$chrome" "$profile" "$page" "$fragment" "$png" \
    "$dom" "$console" "$width" "$height" "$limit" <<'PY' &
import base64, json, math, os, pathlib, select, signal, subprocess, sys, time

chrome, profile, page, fragment, png, dom_path, console_path = sys.argv[1:8]
width, height, limit = (int(v) for v in sys.argv[8:11])
deadline = time.monotonic() + limit


class Failed(Exception):
    pass


def on_term(signum, frame):
    raise Failed(f"stopped by signal {signum}")


signal.signal(signal.SIGTERM, on_term)

url = pathlib.Path(page).resolve().as_uri() + (f"#{fragment}" if fragment else "")
flags = [
    "--headless", "--no-sandbox", "--remote-debugging-pipe", f"--user-data-dir={profile}",
    "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps",
    "--disable-extensions", "--disable-domain-reliability", "--disable-breakpad",
    "--disable-client-side-phishing-detection", "--metrics-recording-only",
    "--password-store=basic", "--use-mock-keychain", "--mute-audio", "--hide-scrollbars",
    "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
    "--force-color-profile=srgb", "--font-render-hinting=none", "about:blank",
]

# Chromium reads commands on fd 3 and writes replies and events on fd 4, each message JSON
# ended by a NUL byte. The pipe ends are first moved above 9 so that placing them on 3 and 4
# in the child never overwrites one with the other.
def high_pipe(first):
    fds = []
    for i, fd in enumerate(os.pipe()):
        fds.append(os.dup2(fd, first + i, inheritable=False))
        os.close(fd)
    return fds


to_chrome_r, to_chrome_w = high_pipe(10)
from_chrome_r, from_chrome_w = high_pipe(12)


def child_fds():
    os.dup2(to_chrome_r, 3)
    os.dup2(from_chrome_w, 4)


log = open(os.path.join(profile, "chromium.log"), "wb")
proc = subprocess.Popen([chrome, *flags], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                        pass_fds=(3, 4), preexec_fn=child_fds, start_new_session=True)
os.close(to_chrome_r)
os.close(from_chrome_w)

next_id = 0
pending = b""
replies = {}
events = []  # (session, method, params), in arrival order
console = []


def read_messages():
    global pending
    left = deadline - time.monotonic()
    if left <= 0:
        raise Failed(f"the page did not finish rendering within {limit} s (--timeout)")
    ready, _, _ = select.select([from_chrome_r], [], [], left)
    if not ready:
        return
    chunk = os.read(from_chrome_r, 1 << 20)
    if not chunk:
        code = proc.wait(timeout=5)
        raise Failed(f"chromium exited (status {code}) before the page was rendered")
    pending += chunk
    if b"\0" not in chunk:
        return  # a long reply (the DOM of a big page) arrives in many reads
    *whole, pending = pending.split(b"\0")
    for raw in whole:
        msg = json.loads(raw)
        if "id" in msg:
            replies[msg["id"]] = msg
        else:
            events.append((msg.get("sessionId"), msg["method"], msg.get("params", {})))
            note(msg["method"], msg.get("params", {}))


def call(method, params=None, session=None):
    global next_id
    next_id += 1
    msg = {"id": next_id, "method": method, "params": params or {}}
    if session:
        msg["sessionId"] = session
    try:
        os.write(to_chrome_w, json.dumps(msg).encode() + b"\0")
    except BrokenPipeError:
        raise Failed(f"chromium exited (status {proc.wait(timeout=5)}) before the page was rendered")
    while next_id not in replies:
        read_messages()
    reply = replies.pop(next_id)
    if "error" in reply:
        raise Failed(f"{method} failed: {reply['error'].get('message', reply['error'])}")
    return reply["result"]


def wait_event(method):
    while True:
        for i, (_, name, params) in enumerate(events):
            if name == method:
                del events[i]
                return params
        read_messages()


def one_line(text):
    return str(text).replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "")


def where(url, line):
    return f" ({url}:{line + 1})" if url else ""


def arg_text(obj):
    if "value" in obj:
        return obj["value"] if isinstance(obj["value"], str) else json.dumps(obj["value"])
    return obj.get("description") or obj.get("unserializableValue") or obj.get("type", "")


def note(method, p):
    """Turns one DevTools event into a --console line, if it is one."""
    if method == "Runtime.consoleAPICalled":
        kind = p["type"]
        level = {"error": "error", "assert": "error", "warning": "warning", "debug": "debug"}
        text = " ".join(arg_text(a) for a in p.get("args", []))
        top = (p.get("stackTrace") or {}).get("callFrames") or [{}]
        src = where(top[0].get("url"), top[0].get("lineNumber", 0))
        console.append(f"{level.get(kind, 'info')} console.{kind}: {one_line(text)}{src}")
    elif method == "Runtime.exceptionThrown":
        d = p["exceptionDetails"]
        exc = d.get("exception") or {}
        text = (exc.get("description") or d.get("text", "")).split("\n")[0]
        if d.get("text", "").startswith("Uncaught (in promise)"):
            text = f"(in promise) {text}"
        console.append(f"error uncaught: {one_line(text)}{where(d.get('url'), d.get('lineNumber', 0))}")
    elif method == "Log.entryAdded":
        e = p["entry"]
        if e["level"] != "verbose":
            src = where(e.get("url"), e.get("lineNumber", 0)) if "lineNumber" in e else (
                f" ({e['url']})" if e.get("url") else "")
            console.append(f"{e['level']} log.{e['source']}: {one_line(e['text'])}{src}")


def render():
    target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
    s = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
        call(f"{domain}.enable", session=s)
    view_h = height or 800
    call("Emulation.setDeviceMetricsOverride",
         {"width": width, "height": view_h, "deviceScaleFactor": 1, "mobile": False}, s)
    nav = call("Page.navigate", {"url": url}, s)
    if nav.get("errorText"):
        raise Failed(f"could not open {url}: {nav['errorText']}")
    wait_event("Page.loadEventFired")
    # Let timers set at load and the first frames run, so the DOM and picture are the settled page.
    call("Runtime.evaluate", {"expression": "new Promise(r => requestAnimationFrame(() =>"
                              " requestAnimationFrame(() => setTimeout(r, 100))))",
                              "awaitPromise": True}, s)
    if dom_path:
        html = call("Runtime.evaluate", {"expression": "(document.doctype ? new XMLSerializer()"
                    ".serializeToString(document.doctype) + '\\n' : '') + "
                    "document.documentElement.outerHTML", "returnByValue": True}, s)
        with open(dom_path, "w", encoding="utf-8") as f:
            f.write(html["result"]["value"] + "\n")
    if height:
        shot_h = height
    else:
        size = call("Page.getLayoutMetrics", session=s)["cssContentSize"]
        # 16384 px is the tallest texture Chromium's software compositor draws in one piece.
        shot_h = min(16384, max(1, math.ceil(size["height"])))
    shot = call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": shot_h, "scale": 1}}, s)
    with open(png, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    # Messages logged while the page was captured arrive before the close reply.
    call("Target.closeTarget", {"targetId": target})


def stop_chromium(graceful):
    """Closes Chromium (asked politely after a success, so it reaps its own children), then makes
    sure nothing of its process group is left."""
    try:
        if graceful:
            os.write(to_chrome_w, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        else:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, BrokenPipeError):
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # The zygote and renderers share Chromium's process group; make sure none outlives it.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


status = 0
try:
    render()
except Failed as e:
    status = 1
    tail = [l for l in open(os.path.join(profile, "chromium.log"), errors="replace")
            if "FATAL" in l or "ERROR:content" in l][-1:]
    print(f"render-report: {e}{'; chromium said: ' + tail[0].strip() if tail else ''}",
          file=sys.stderr)
except KeyboardInterrupt:
    status = 130
    print("render-report: interrupted", file=sys.stderr)
finally:
    # A second Ctrl-C must not leave Chromium behind half-stopped.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stop_chromium(graceful=status == 0)
if console_path:
    with open(console_path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in console)
sys.exit(status)
PY
driver=$!
stop() {
    kill -TERM "$driver" 2>/dev/null || true
    wait "$driver" || true
    exit "$1"
}
trap 'stop 130' INT
trap 'stop 143' TERM
trap 'stop 129' HUP
wait "$driver"
