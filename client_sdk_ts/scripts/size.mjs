// The browser bundle's size (issue 24, "Figures": at most 25 KB gzip for the local mechanisms and
// the client): the entry and each chunk, minified and gzipped, and what pages load.
//
//   npm run size            (builds first; or: node scripts/size.mjs after npm run build)
//
// A chunk's size counts its file; a page's, every file it fetches (the entry, the chunks its
// campaigns need and the chunks those import), each gzipped on its own as a server sends it.
// KB here is 1000 bytes, as the target states it. --json prints the figures as one JSON document.
import { readFileSync } from "node:fs";
import { dirname, join, posix } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const dist = join(dirname(fileURLToPath(import.meta.url)), "..", "dist");
const TARGET = 25_000;
/** Bytes a one-mechanism page should stay under the target by (so one more error message fits). */
const MARGIN = 500;

/** What dist/browser-meta.json says of the last build (scripts/build-browser.mjs). */
export function readMeta() {
  return JSON.parse(readFileSync(join(dist, "browser-meta.json"), "utf8"));
}

/** Minified and gzip (level 9) bytes of a file under dist/. */
function sizes(file) {
  const bytes = readFileSync(join(dist, file));
  return { minified: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
}

/** The files a page fetches to run `chunks`: the entry, the chunks, and what they import, each once. */
export function pageFiles(meta, chunks) {
  const byFile = new Map(Object.values(meta.chunks).map((chunk) => [chunk.file, chunk]));
  const files = new Set([meta.entry]);
  const visit = (file) => {
    if (files.has(file)) return;
    files.add(file);
    for (const path of byFile.get(file)?.imports ?? []) visit(posix.normalize(posix.join(posix.dirname(file), path)));
  };
  for (const chunk of chunks) visit(meta.chunks[chunk].file);
  return [...files];
}

export function figures(meta = readMeta()) {
  const entry = { file: meta.entry, ...sizes(meta.entry) };
  const chunks = Object.fromEntries(Object.entries(meta.chunks).map(([name, chunk]) => [name, { file: chunk.file, ...sizes(chunk.file) }]));
  const page = (names) => {
    const files = pageFiles(meta, names);
    return { chunks: names, files, gzip: files.reduce((sum, file) => sum + sizes(file).gzip, 0) };
  };
  // the mechanism groups' chunks (shuffled, sealing and dap serve
  // shuffled and secure-aggregation campaigns: none of them is a local mechanism group)
  const local = Object.keys(meta.chunks).filter((name) => meta.chunks[name].mechanisms !== undefined);
  const group_pages = Object.fromEntries(local.map((name) => [name, page([name])]));
  return {
    entry,
    chunks,
    /** A page recording campaigns of one mechanism group (its chunk and what it imports). */
    group_pages,
    /** A page recording campaigns of one mechanism (any variant: its group's chunk holds them all). */
    mechanism_pages: Object.fromEntries(
      local.flatMap((name) => meta.chunks[name].mechanisms.map((mechanism) => [mechanism, { group: name, gzip: group_pages[name].gzip }])).sort(),
    ),
    pages: {
      categorical: page(["categorical"]),
      every_local_mechanism: page(local),
      every_local_mechanism_and_sealing: page(Object.keys(meta.chunks).filter((name) => name !== "dap")),
      /** A secure-aggregation campaign, and one randomizing locally with grr first (the categorical chunk). */
      dap: page(["dap"]),
      dap_with_local_grr: page(["dap", "categorical"]),
    },
    /** The single-module build (dist/browser-full.js): every mechanism, sealing and DAP in one file. */
    full: meta.full === undefined ? null : { file: meta.full, ...sizes(meta.full) },
    target_gzip: TARGET,
    margin_gzip: MARGIN,
  };
}

const kb = (bytes) => `${(bytes / 1000).toFixed(1)} KB`;

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = figures();
  if (process.argv.includes("--json")) {
    console.log(JSON.stringify(result, null, 2));
  } else {
    console.log(`entry ${result.entry.file}: ${kb(result.entry.minified)} minified, ${kb(result.entry.gzip)} gzip`);
    for (const [name, chunk] of Object.entries(result.chunks)) {
      console.log(`chunk ${name} (${chunk.file}): ${kb(chunk.minified)} minified, ${kb(chunk.gzip)} gzip`);
    }
    const { categorical, every_local_mechanism: local, every_local_mechanism_and_sealing: sealed } = result.pages;
    console.log(
      `a page recording one categorical campaign loads ${kb(categorical.gzip)} gzip; ` +
        `one with every local mechanism ${kb(local.gzip)}; with sealing ${kb(sealed.gzip)}`,
    );
    if (result.full) console.log(`the single-module build ${result.full.file} (every mechanism, sealing and DAP): ${kb(result.full.minified)} minified, ${kb(result.full.gzip)} gzip`);
    console.log(`a page recording a secure-aggregation campaign loads ${kb(result.pages.dap.gzip)} gzip; with local grr ${kb(result.pages.dap_with_local_grr.gzip)}`);
    const groups = Object.entries(result.group_pages);
    console.log(`a page recording campaigns of one group loads: ${groups.map(([name, p]) => `${name} ${kb(p.gzip)}`).join(", ")}`);
    const mechanisms = Object.entries(result.mechanism_pages).sort((a, b) => b[1].gzip - a[1].gzip);
    console.log("a page recording campaigns of one mechanism (any variant) loads, gzip bytes:");
    for (const [name, p] of mechanisms) console.log(`  ${name.padEnd(13)} ${String(p.gzip).padStart(6)}  (${p.group})`);
    const bound = TARGET - MARGIN;
    const over = mechanisms.filter(([, p]) => p.gzip > TARGET).map(([name]) => name);
    const close = mechanisms.filter(([, p]) => p.gzip > bound && p.gzip <= TARGET).map(([name]) => name);
    console.log(
      `target (the client and a campaign's local mechanism, at most ${kb(TARGET)} gzip): ` +
        (over.length ? "NOT met" : `met by every mechanism (largest page ${mechanisms[0][0]} ${mechanisms[0][1].gzip} bytes)`) +
        (over.length ? `; over ${kb(TARGET)}: ${over.join(", ")}` : "") +
        (close.length ? `; within ${MARGIN} bytes of it (little room left): ${close.join(", ")}` : ""),
    );
  }
}
