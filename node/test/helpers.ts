/**
 * What the tests share: temporary store directories, a served store held by another process,
 * and the paths of the `factlog` command and Python built from this checkout.
 */

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

/** The package directory (`node/`). */
export const packageDir = resolve(here, "..");

/** The repository's root. */
export const repoDir = resolve(packageDir, "..");

/** A new empty directory for a store, removed by `cleanup()`. Mode 0700: a shared store
 * refuses a directory others can write. */
export function tempDir(prefix = "factlog-node-"): { dir: string; cleanup: () => void } {
  const base = mkdtempSync(join(tmpdir(), prefix));
  const dir = join(base, "store");
  return { dir, cleanup: () => rmSync(base, { recursive: true, force: true }) };
}

/** A process holding the store in `dir` and sharing it (`test/holder.mjs`, with more
 * `Store.open` options when given), once it is served. `stop()` closes the store in that process and waits for it to exit. */
export async function servedStore(
  dir: string,
  options: Record<string, unknown> = {},
): Promise<{ pid: number; stop: () => Promise<void> }> {
  const args = [join(here, "holder.mjs"), dir, JSON.stringify(options)];
  const child: ChildProcess = spawn(process.execPath, args, {
    stdio: ["pipe", "pipe", "inherit"],
  });
  await new Promise<void>((ready, failed) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes("ready\n")) ready();
    });
    child.on("exit", (code) => failed(new Error(`the holder exited with ${code} before serving`)));
  });
  const exited = new Promise<void>((done) => child.on("exit", () => done()));
  return {
    pid: child.pid!,
    stop: async () => {
      child.stdin!.end();
      await exited;
    },
  };
}

/** The `factlog` command of this checkout (`target/debug/factlog`), built if missing. */
export function factlogCommand(): string {
  const target = process.env.CARGO_TARGET_DIR ?? join(repoDir, "target");
  const path = join(target, "debug", "factlog");
  if (!existsSync(path)) {
    const built = spawnSync("cargo", ["build", "-q", "-p", "factlog-cli"], {
      cwd: repoDir,
      stdio: "inherit",
    });
    if (built.status !== 0) throw new Error("cannot build the factlog command");
  }
  return path;
}

/** Runs the `factlog` command; its stdout, failing the test on a non-zero exit. */
export function factlog(...args: string[]): string {
  const run = spawnSync(factlogCommand(), args, { encoding: "utf8" });
  if (run.status !== 0) {
    throw new Error(`factlog ${args.join(" ")} exited ${run.status}: ${run.stderr}`);
  }
  return run.stdout;
}
