/**
 * `node dist/src/conformance-cli.js [--dir DIR] [--outputs FILE]`: this SDK's payload for every
 * case of every vector file whose mechanism it registers, written as the outputs file that
 * `python -m client_sdk.conformance check --outputs FILE` checks ({mechanism: [payloads]}).
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { isPorted, parseVectorFile, runCase } from "./conformance.js";

/** The repository's conformance/vectors, from dist/src/ (or src/) of the package. */
export const DEFAULT_VECTORS = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "conformance", "vectors");

export function conformanceOutputs(directory: string): { outputs: Record<string, unknown[]>; skipped: string[] } {
  const outputs: Record<string, unknown[]> = {};
  const skipped: string[] = [];
  for (const name of readdirSync(directory).filter((f) => f.endsWith(".json")).sort()) {
    const file = parseVectorFile(readFileSync(join(directory, name), "utf-8"));
    if (!isPorted(file.mechanism)) {
      skipped.push(file.mechanism);
      continue;
    }
    outputs[file.mechanism] = file.cases.map(runCase);
  }
  return { outputs, skipped };
}

function main(argv: string[]): number {
  let directory = DEFAULT_VECTORS;
  let target: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--dir" && argv[i + 1] !== undefined) directory = argv[++i]!;
    else if (argv[i] === "--outputs" && argv[i + 1] !== undefined) target = argv[++i]!;
    else {
      process.stderr.write("usage: conformance-cli [--dir DIR] [--outputs FILE]\n");
      return 2;
    }
  }
  const { outputs, skipped } = conformanceOutputs(directory);
  const text = JSON.stringify(outputs);
  if (target === undefined) process.stdout.write(`${text}\n`);
  else writeFileSync(target, text);
  if (skipped.length > 0) process.stderr.write(`not ported yet: ${skipped.join(", ")}\n`);
  return 0;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
