// The browser bundle (issue 24, the bundle size target): dist/browser.js, the entry a page loads
// (the client, its policy, ledger, outbox and the mechanism loader), and one chunk under
// dist/browser/ per module the entry imports with `import()`: each mechanism group
// (src/mechanisms/groups/, one chunk each), shuffled campaigns' checks, sealing and DAP. A
// page fetches the entry, then the one chunk a campaign needs when it first meets it; a chunk
// imports nothing but the entry, so a page never loads another group's code.
//
//   node scripts/build-browser.mjs        (npm run build runs it after tsc)
//
// The rule. esbuild's own --splitting would move the code the entry shares with the chunks into
// further shared chunks that every page fetches, and it tree-shakes less. Here the entry holds
// that code and lends it: it exports the names the chunks take of the modules it holds as
// `__ldpModules` (one array; an internal export, not API), and a chunk takes them from
// "../browser.js" instead of carrying a copy.
//  - A module of this package of which the entry holds a class or a `let` is lent whole (every
//    name any chunk uses): one copy per page, so `instanceof` (JsonFloat, PolicyViolation) and
//    state (the policy's registered bound) hold. So is rational.ts (LENT_WHOLE), which nearly
//    every chunk uses.
//  - Of another module the entry holds (of this package, or a library's), the entry lends the
//    names it holds anyway (lending one costs it its slot, at most HELD_SLACK bytes); a chunk
//    bundles its own copy of the other names it needs.
//  - Everything else a chunk needs (the samplers, the config readers, the memoized chains, the
//    oracles of categorical.ts) it bundles itself. Two chunks on one page may so each have a
//    copy of a helper or a class; no object crosses from one chunk to another (a mechanism is
//    built and used by its own chunk's code; the client only calls its methods), so no
//    `instanceof` sees two copies. The price: a page recording many groups at once loads those
//    copies several times (npm run size reports it).
// Which names a chunk uses is found by trial bundles (tree-shaken, so a name only dropped code
// mentions does not count). A build's facts go to dist/browser-meta.json for `npm run size` and
// the tests (each chunk's file, what it imports, its inputs, and a group's mechanisms).
//
// Beside it, dist/browser-full.js: the same exports as the Node entry (FACTORIES, a synchronous
// mechanismFromConfig) in one self-contained module, for a page recording many kinds of
// campaign (one fetch, and no code twice; src/browser-full.ts).
import * as esbuild from "esbuild";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(pkg, "src");
const out = join(pkg, "dist");
const chunkDir = join(out, "browser");
const groups = join(src, "mechanisms", "groups");
/** The single-module build (src/browser-full.ts): every mechanism in one file, no chunk to fetch. */
const FULL = "browser-full.js";

/** The chunks: each one's source and what it exports (what the entry takes from it). */
export const CHUNKS = {
  // each mechanism group's module exports its FACTORIES (src/mechanisms/loader.ts)
  ...Object.fromEntries(
    readdirSync(groups)
      .filter((file) => file.endsWith(".ts"))
      .sort()
      .map((file) => [file.slice(0, -".ts".length), { source: join(groups, file), exports: ["FACTORIES"] }]),
  ),
  // what shuffled campaigns need: the amplification bound (the policy's central ceiling), the sealing key
  shuffled: { source: join(src, "shuffled.ts"), exports: ["AMPLIFICATION", "sealingKey"] },
  sealing: { source: join(src, "sealing.ts"), exports: ["sealPayload"] },
  dap: { source: join(src, "dap", "driver.ts"), exports: ["dapEntry"] },
};
const COMMON = {
  absWorkingDir: pkg, // the metafile's paths are relative to it
  bundle: true,
  format: "esm",
  minify: true,
  platform: "browser",
  target: "es2022",
  legalComments: "none",
  logLevel: "warning",
};
/** What the entry exports of the names it lends, one array (an internal export, not API). */
const LENDER_ARRAY = "__ldpModules";
const LENDER = "ldp-telemetry:entry";
/**
 * Whether the entry lends a module it holds to the chunks that use it. Not @noble/hashes' 64-bit
 * helpers: SHA-256 needs none of them and lending them would put all of them in every page; the
 * BLAKE2b of the string mechanisms and of sealing bundles its own.
 */
const LEND = (path) => !path.endsWith("/@noble/hashes/esm/_u64.js");
/**
 * Modules the entry lends whole though it holds little of them: the exact rationals, which
 * nearly every chunk uses (the thresholds of the samplers). Lent, they cost the entry 1.2 KB gzip
 * and a one-mechanism page less than 0.1 KB more than its own copy would; a page recording many
 * groups at once loads them once instead of once per chunk (11 KB gzip less for all of them).
 */
const LENT_WHOLE = [join(src, "rational.ts")];
/**
 * Bytes a name may add to the minified entry and still count as held by it anyway (its slot in
 * `__ldpModules`); a name the entry does not hold adds its declaration.
 */
const HELD_SLACK = 8;

/** Resolves `args` as esbuild would, without this plugin (absolute path, or null when external). */
async function resolveAsUsual(build, args) {
  const result = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: { usual: true } });
  if (result.errors.length) return null;
  return result.external ? null : result.path;
}

/** The entry's dynamic imports point at the chunks' files (`files`: chunk to its file name). */
function chunkImports(files) {
  return {
    name: "ldp-chunk-imports",
    setup(build) {
      build.onResolve({ filter: /.*/ }, async (args) => {
        if (args.kind !== "dynamic-import" || args.pluginData?.usual) return undefined;
        const path = await resolveAsUsual(build, args);
        const chunk = Object.keys(CHUNKS).find((name) => CHUNKS[name].source === path);
        if (chunk === undefined) throw new Error(`${relative(pkg, args.importer)} imports ${args.path} dynamically: scripts/build-browser.mjs makes no chunk of it`);
        return { path: `./browser/${files[chunk]}`, external: true };
      });
    },
  };
}

/** Minified bytes of each module in an output (esbuild's metafile), largest first. */
function inputBytes(output) {
  const rows = Object.entries(output.inputs).filter(([, input]) => input.bytesInOutput > 0);
  return Object.fromEntries(rows.sort((a, b) => b[1].bytesInOutput - a[1].bytesInOutput).map(([path, input]) => [path.replace(/^.*node_modules\//, ""), input.bytesInOutput]));
}

/** The absolute paths of the modules of which a bundle keeps code (a module tree-shaken away entirely is not held). */
async function inputsOf(options) {
  const result = await esbuild.build({ ...COMMON, ...options, write: false, metafile: true, outdir: "/tmp/ldp-unused" });
  const kept = Object.values(result.metafile.outputs).flatMap((output) => Object.entries(output.inputs).filter(([, input]) => input.bytesInOutput > 0));
  return new Set(kept.map(([path]) => join(pkg, path)));
}

/** The names a module exports (types erased). */
async function exportNames(file) {
  const result = await esbuild.build({ entryPoints: [file], bundle: false, format: "esm", write: false, metafile: true, outdir: "/tmp/ldp-unused", logLevel: "silent" });
  return Object.values(result.metafile.outputs).flatMap((output) => output.exports ?? []);
}

const PROBE = "ldp-probe";

/**
 * The names of lendable modules that a trial bundle uses, by module index: in a trial each such
 * module exports a pure marker per name, `probe("<index>:<name>")`, and what the bundle keeps
 * after tree-shaking is what it uses (an import statement would list every name its module's
 * source mentions, used or not).
 */
function usedNames(code, names) {
  for (const match of code.matchAll(/"ldp-probe:(\d+):([\w$]+)"/g)) {
    const index = Number(match[1]);
    names.set(index, new Set([...(names.get(index) ?? []), match[2]]));
  }
}

const CLASS = /^((?:export )?(?:abstract )?class (\w+)[^{\n]*\{)$/gm;

/**
 * Which modules of this package the entry holds a class or a `let` of (by index in `bridge`): a
 * trial bundle of the entry in which each class declares a marker, kept only with its class.
 * Such a module is lent whole (every name a chunk uses): one copy of its classes per page, for
 * `instanceof` (JsonFloat, PolicyViolation), and of its state. Of a module whose classes the
 * entry does not hold (the Rational of rational.ts), a chunk's own copy is the page's only one.
 */
async function heldWhole(bridge, placeholders) {
  const own = (path) => bridge.includes(path) && !path.includes("/node_modules/");
  const marker = {
    name: "ldp-class-markers",
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, (args) => {
        if (!own(args.path)) return undefined;
        const index = bridge.indexOf(args.path);
        const source = readFileSync(args.path, "utf8").replace(CLASS, (line, _, name) => `${line} static "ldp-class:${index}:${name}" = 0;`);
        return { contents: source, loader: "ts" };
      });
    },
  };
  const trial = await esbuild.build({ ...COMMON, entryPoints: [join(src, "browser.ts")], write: false, outdir: "/tmp/ldp-unused", plugins: [marker, chunkImports(placeholders)] });
  const held = new Set([...trial.outputFiles[0].text.matchAll(/"ldp-class:(\d+):\w+"/g)].map((match) => Number(match[1])));
  return bridge.map((path, i) => own(path) && (held.has(i) || /^(export )?let /m.test(readFileSync(path, "utf8"))));
}

/**
 * In a chunk, a module the entry lends becomes a view of the entry's copy (`plan.slots`: the
 * index in `__ldpModules` of each name it borrows, by module index; `plan.own`: the modules of
 * which the chunk also bundles its own copy of the names not lent, `ldp-own:<path>`; `null`, a
 * trial: every lendable module exports markers, to learn what the chunk uses).
 */
function borrow(bridge, plan, exportsOf) {
  return {
    name: "ldp-borrow",
    setup(build) {
      // one module of the chunk imports the entry's array, and the views share it
      build.onResolve({ filter: /^ldp-telemetry:entry$/ }, (args) =>
        args.namespace === "ldp-lender" ? { path: "../browser.js", external: true } : { path: "entry", namespace: "ldp-lender" },
      );
      build.onLoad({ filter: /.*/, namespace: "ldp-lender" }, () => ({ contents: `export { ${LENDER_ARRAY} } from "${LENDER}";\n`, loader: "js" }));
      build.onResolve({ filter: /^ldp-own:/ }, (args) => ({ path: args.path.slice("ldp-own:".length) }));
      build.onResolve({ filter: /.*/ }, async (args) => {
        if (args.pluginData?.usual || args.kind === "entry-point") return undefined;
        const path = await resolveAsUsual(build, args);
        const index = path === null ? -1 : bridge.indexOf(path);
        if (index >= 0 && plan === null) return { path, namespace: PROBE };
        if (index >= 0 && plan.slots.has(index)) return { path, namespace: "ldp-borrowed" };
        return undefined;
      });
      build.onLoad({ filter: /.*/, namespace: PROBE }, (args) => {
        const index = bridge.indexOf(args.path);
        const markers = exportsOf.get(args.path).map((name) => `${name} = /* @__PURE__ */ probe("${PROBE}:${index}:${name}")`);
        return { contents: `import { probe } from "${PROBE}";\nexport const ${markers.join(", ")};\n`, loader: "js" };
      });
      build.onResolve({ filter: new RegExp(`^${PROBE}$`) }, () => ({ path: PROBE, external: true }));
      build.onLoad({ filter: /.*/, namespace: "ldp-borrowed" }, (args) => {
        const index = bridge.indexOf(args.path);
        const names = [...plan.slots.get(index)];
        const lines = [`import { ${LENDER_ARRAY} as m } from "${LENDER}";`];
        lines.push(`export const ${names.map(([name, slot]) => `${name} = m[${slot}]`).join(", ")};`);
        // the names declared here take precedence over those of the star export
        if (plan.own.has(index)) lines.push(`export * from ${JSON.stringify(`ldp-own:${args.path}`)};`);
        else {
          // a name the chunk's sources import but its bundle does not use (tree-shaken away; a
          // use would fail loudly when the chunk loads)
          const unused = exportsOf.get(args.path).filter((name) => !plan.slots.get(index).has(name));
          const where = relative(pkg, args.path);
          lines.push(`function unlent(name) { throw new Error(\`${where}: \${name} is not lent to this chunk (scripts/build-browser.mjs)\`); }`);
          if (unused.length) lines.push(`export const ${unused.map((name) => `${name} = /* @__PURE__ */ unlent("${name}")`).join(", ")};`);
        }
        return { contents: lines.join("\n") + "\n", loader: "js", resolveDir: dirname(args.path) };
      });
    },
  };
}

/** The entry's source: the browser API, and `__ldpModules`, the names it lends (`lent`, by module). */
function entrySource(bridge, lent) {
  const lines = [`export * from "./browser.ts";`];
  bridge.forEach((path, i) => {
    const names = [...lent[i]].sort();
    if (names.length) lines.push(`import { ${names.map((name) => `${name} as m${i}_${name}`).join(", ")} } from ${JSON.stringify(path)};`);
  });
  const flat = bridge.flatMap((path, i) => [...lent[i]].sort().map((name) => `m${i}_${name}`));
  lines.push(`/** What the chunks under browser/ borrow (scripts/build-browser.mjs); internal, not API. */`);
  lines.push(`export const ${LENDER_ARRAY} = [${flat.join(", ")}];`);
  return { contents: lines.join("\n"), resolveDir: src, sourcefile: "browser-entry.js", loader: "js" };
}

/** The mechanism names a group's chunk defines (its FACTORIES, from tsc's output under dist/src). */
async function groupMechanisms(chunk) {
  const source = CHUNKS[chunk].source;
  if (dirname(source) !== groups) return undefined;
  const compiled = join(out, "src", relative(src, source)).replace(/\.ts$/, ".js");
  return Object.keys((await import(pathToFileURL(compiled).href)).FACTORIES).sort();
}

export async function buildBrowser() {
  rmSync(chunkDir, { recursive: true, force: true });
  mkdirSync(chunkDir, { recursive: true });
  const placeholders = Object.fromEntries(Object.keys(CHUNKS).map((chunk) => [chunk, `${chunk}.js`]));
  // 1. what the entry holds that a chunk includes too: the modules it may lend (`bridge`)
  const held = await inputsOf({ entryPoints: [join(src, "browser.ts")], plugins: [chunkImports(placeholders)] });
  const shared = new Set();
  for (const { source } of Object.values(CHUNKS)) for (const path of await inputsOf({ entryPoints: [source] })) if (held.has(path) && LEND(path)) shared.add(path);
  for (const path of LENT_WHOLE) shared.add(path);
  const bridge = [...shared].sort();
  const whole = (await heldWhole(bridge, placeholders)).map((held, i) => held || LENT_WHOLE.includes(bridge[i]));
  const exportsOf = new Map();
  for (const path of bridge) exportsOf.set(path, await exportNames(path));
  /** What code (`contents`, an ES module) uses of each lendable module. */
  const trialNeeds = async (contents, resolveDir, chunk) => {
    const trial = await esbuild.build({
      ...COMMON,
      stdin: { contents, resolveDir, sourcefile: `${chunk}.js`, loader: "js" },
      write: false,
      outdir: "/tmp/ldp-unused",
      plugins: [borrow(bridge, null, exportsOf)],
    });
    const names = new Map();
    for (const output of trial.outputFiles) usedNames(output.text, names);
    return names;
  };
  const merge = (into, from) => {
    for (const [i, names] of from) into.set(i, new Set([...(into.get(i) ?? []), ...names]));
  };
  // which names of each lendable module each chunk's own code uses
  const direct = {};
  for (const [chunk, { source, exports }] of Object.entries(CHUNKS)) {
    direct[chunk] = await trialNeeds(`export { ${exports.join(", ")} } from ${JSON.stringify(source)};`, dirname(source), chunk);
  }
  /** The names the entry lends, by module (what it holds anyway; of a module lent whole, all any chunk uses). */
  const lentNames = bridge.map(() => new Set());
  /**
   * What each chunk needs, with the entry lending `lentNames`: a chunk bundles its own copy of
   * what else it needs of a module lent name by name, and what that copy uses counts too.
   */
  const expand = async () => {
    const needs = {};
    for (const chunk of Object.keys(CHUNKS)) {
      needs[chunk] = new Map([...direct[chunk]].map(([i, names]) => [i, new Set(names)]));
      const expanded = new Map();
      for (let grown = true; grown; ) {
        grown = false;
        for (const [i, wanted] of [...needs[chunk]]) {
          const own = whole[i] ? [] : [...wanted].filter((name) => !lentNames[i].has(name) && !expanded.get(i)?.has(name)).sort();
          if (own.length === 0) continue;
          expanded.set(i, new Set([...(expanded.get(i) ?? []), ...own]));
          merge(needs[chunk], await trialNeeds(`export { ${own.join(", ")} } from ${JSON.stringify(`ldp-own:${bridge[i]}`)};`, pkg, chunk));
          grown = true;
        }
      }
    }
    return needs;
  };
  const lendWhole = (needs) =>
    bridge.forEach((path, i) => {
      if (whole[i]) for (const byModule of Object.values(needs)) for (const name of byModule.get(i) ?? []) lentNames[i].add(name);
    });
  let needs = await expand();
  lendWhole(needs);
  // of the other modules, the names the entry holds anyway (lending one costs its slot)
  const entryBytes = async (lent) =>
    (await esbuild.build({ ...COMMON, stdin: entrySource(bridge, lent), write: false, outdir: "/tmp/ldp-unused", plugins: [chunkImports(placeholders)] })).outputFiles[0].contents.length;
  let size = await entryBytes(lentNames);
  const candidates = new Set();
  for (const byModule of Object.values(needs)) for (const [i, names] of byModule) for (const name of names) if (!lentNames[i].has(name)) candidates.add(`${i}\0${name}`);
  for (const candidate of [...candidates].sort()) {
    const [i, name] = [Number(candidate.split("\0")[0]), candidate.split("\0")[1]];
    const trial = lentNames.map((names, j) => (j === i ? new Set([...names, name]) : names));
    const grown = await entryBytes(trial);
    if (grown - size > HELD_SLACK) continue;
    lentNames[i].add(name);
    size = grown;
  }
  needs = await expand();
  lendWhole(needs);
  /** The names the entry lends, in the order of its array. */
  const slots = bridge.flatMap((path, i) => [...lentNames[i]].sort().map((name) => ({ module: i, name })));
  const planOf = (chunk) => {
    const plan = { slots: new Map(), own: new Set() };
    for (const [i, wanted] of needs[chunk]) {
      const lent = [...wanted].filter((name) => lentNames[i].has(name));
      if (lent.length < wanted.size) plan.own.add(i);
      if (lent.length > 0) plan.slots.set(i, new Map(lent.map((name) => [name, slots.findIndex((s) => s.module === i && s.name === name)])));
    }
    return plan;
  };
  // 2. the chunks, each importing the lent names from the entry
  const files = {};
  const meta = { entry: "browser.js", chunks: {}, lent: Object.fromEntries(bridge.map((path, i) => [relative(pkg, path), [...lentNames[i]].sort()])) };
  for (const [chunk, { source, exports }] of Object.entries(CHUNKS)) {
    const result = await esbuild.build({
      ...COMMON,
      stdin: { contents: `export { ${exports.join(", ")} } from ${JSON.stringify(source)};`, resolveDir: dirname(source), sourcefile: `${chunk}.js`, loader: "js" },
      outdir: chunkDir,
      entryNames: `${chunk}-[hash]`,
      metafile: true,
      plugins: [borrow(bridge, planOf(chunk), exportsOf)],
    });
    const [output, info] = Object.entries(result.metafile.outputs).find(([path]) => path.endsWith(".js"));
    files[chunk] = output.split("/").pop();
    meta.chunks[chunk] = {
      file: `browser/${files[chunk]}`,
      mechanisms: await groupMechanisms(chunk),
      // what it takes from the entry: [module, name, index in __ldpModules]
      borrows: [...planOf(chunk).slots].flatMap(([i, names]) => [...names].map(([name, slot]) => [relative(pkg, bridge[i]), name, slot])),
      imports: [...new Set(info.imports.filter((i) => i.external).map((i) => i.path))],
      inputs: inputBytes(info),
    };
  }
  // 3. the entry, with its dynamic imports pointing at the chunks and the lent names exported
  const entry = await esbuild.build({
    ...COMMON,
    stdin: entrySource(bridge, lentNames),
    outfile: join(out, "browser.js"),
    metafile: true,
    plugins: [chunkImports(files)],
  });
  const [, entryInfo] = Object.entries(entry.metafile.outputs).find(([path]) => path.endsWith("browser.js"));
  meta.entryInputs = inputBytes(entryInfo);
  // 4. the single-module build: every module in one file (esbuild inlines the dynamic imports)
  await esbuild.build({ ...COMMON, entryPoints: [join(src, "browser-full.ts")], outfile: join(out, FULL) });
  meta.full = FULL;
  writeFileSync(join(out, "browser-meta.json"), JSON.stringify(meta, null, 2) + "\n");
  return meta;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildBrowser();
