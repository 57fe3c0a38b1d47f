/**
 * The README's TypeScript examples run as written: each ```ts block of the repository's
 * README.md and of node/README.md is type-checked against the package's published types
 * (`dist/*.d.ts`, as a user's project would see them) and then run, twice (each example
 * starts by removing what it writes), and what it prints is checked where the README says
 * what it prints.
 */

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { afterAll, describe, expect, test, vi } from "vitest";
import { packageDir, repoDir } from "./helpers.js";

/** The ```ts blocks of a Markdown file, with the heading each is under. */
function tsBlocks(path: string): Array<{ heading: string; code: string }> {
  const blocks: Array<{ heading: string; code: string }> = [];
  let heading = "";
  let block: string[] | null = null;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (block === null && line.startsWith("#")) heading = line.replace(/^#+\s*/, "");
    else if (block === null && line.trim() === "```ts") block = [];
    else if (block !== null && line.trim() === "```") {
      blocks.push({ heading, code: block.join("\n") });
      block = null;
    } else if (block !== null) block.push(line);
  }
  expect(block, `an unclosed \`\`\`ts block in ${path}`).toBeNull();
  return blocks;
}

// The examples are written beside the tests, so that `factlog` resolves to this package.
const scratch = mkdtempSync(join(packageDir, "test", ".readme-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const examples = [
  ...tsBlocks(join(repoDir, "README.md")).map((b) => ({ ...b, file: "README.md" })),
  ...tsBlocks(join(packageDir, "README.md")).map((b) => ({ ...b, file: "node/README.md" })),
];

test("the READMEs have TypeScript examples", () => {
  expect(examples.filter((e) => e.file === "README.md").length).toBeGreaterThanOrEqual(1);
});

describe.each(examples.map((e, i) => ({ ...e, index: i })))(
  "$file, $heading (example $index)",
  ({ code, index }) => {
    const path = join(scratch, `example-${index}.mts`);
    writeFileSync(path, `${code}\nexport {};\n`);

    test("type-checks against the published types", () => {
      const program = ts.createProgram([path], {
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        lib: ["lib.es2022.d.ts", "lib.esnext.disposable.d.ts"],
        types: ["node"],
        strict: true,
        noEmit: true,
        skipLibCheck: true,
      });
      const diagnostics = ts
        .getPreEmitDiagnostics(program)
        .map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
      expect(diagnostics).toEqual([]);
    });

    test("runs twice, printing what it says", async () => {
      for (let run = 0; run < 2; run += 1) {
        const printed: string[] = [];
        const log = vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
          printed.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
        });
        try {
          await import(`${path}?run=${run}`);
        } finally {
          log.mockRestore();
        }
        // Every `console.log(...); // OUTPUT` comment says what that line prints (compared
        // without spaces and quotes: the README writes objects as Node prints them).
        const said = [...code.matchAll(/console\.log\([^;]*\);\s*\/\/\s*(.+)$/gm)];
        const bare = (text: string) => text.replace(/[\s"']/g, "");
        for (const [, line] of said) expect(printed.map(bare)).toContain(bare(line));
      }
    });
  },
);
