"""record() latency of the browser bundle in headless system Chromium (for scripts/bench.mjs).

Serves dist/browser.js, its chunks (dist/browser/) and a page from a loopback port, pins a
campaign (grr, else duchi), records RECORDS values one record() at a time with IndexedDB storage,
and prints p50/p99 in milliseconds (the first record waits for the mechanism's chunk, loaded
from the loopback server). Needs Playwright
(the Python package) and /usr/bin/chromium; exits 1 saying which is missing.
"""

from __future__ import annotations

import http.server
import sys
import threading
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
RECORDS = 1000
DIST = Path(__file__).resolve().parents[1] / "dist"

PAGE = """<!doctype html><meta charset="utf-8"><script type="module">
import * as sdk from "/browser.js";
const configs = {
  grr: ['{"epsilon":1.0,"k":4,"mechanism":"grr"}', ["a", "b", "c", "d"], () => "b"],
  duchi: ['{"epsilon":1.0,"lower":0.0,"mechanism":"duchi","upper":10.0}', null, () => 4.5],
};
window.bench = async (records) => {
  const name = Object.keys(configs).find((m) => m in sdk.MECHANISM_GROUPS);
  if (name === undefined) return { error: "the bundle registers neither grr nor duchi" };
  const [text, domain, value] = configs[name];
  const content = { mechanism: sdk.parseJson(text), domain, policy: null, min_batch_size: 100 };
  const id = sdk.configId(content);
  const document = sdk.canonicalJson({ ...content, name: "bench", config_id: id });
  const client = new sdk.TelemetryClient("https://collector.invalid", {
    storage: new sdk.IndexedDBStorage("ldp-bench"), campaigns: [document],
  });
  const times = [];
  for (let i = 0; i < records; i++) {
    const started = performance.now();
    await client.record("bench", value());
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return { mechanism: name, p50: times[Math.floor(0.5 * records)],
           p99: times[Math.floor(0.99 * records)], queued: await client.pending(),
           persistent: client.status().storage.persistent };
};
document.title = "ready";
</script>"""


def main() -> int:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("Playwright (the Python package) is not installed", file=sys.stderr)
        return 1
    if not Path(CHROMIUM).exists() or not (DIST / "browser.js").exists():
        print(f"needs {CHROMIUM} and {DIST / 'browser.js'} (npm run build)", file=sys.stderr)
        return 1
    files = {"/": (PAGE.encode(), "text/html")}
    for script in [DIST / "browser.js", *(DIST / "browser").glob("*.js")]:
        files["/" + script.relative_to(DIST).as_posix()] = (script.read_bytes(), "text/javascript")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body, kind = files.get(self.path, (b"", "text/plain"))
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
            page.wait_for_function("document.title === 'ready'")
            result = page.evaluate("n => window.bench(n)", RECORDS)
            browser.close()
    finally:
        server.shutdown()
    if "error" in result:
        print(result["error"], file=sys.stderr)
        return 1
    print(
        f"{RECORDS} records ({result['mechanism']}, IndexedDB, persistent={result['persistent']}): "
        f"p50 {result['p50']:.2f} ms, p99 {result['p99']:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
