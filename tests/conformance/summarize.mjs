// Reads vitest's JSON results and the expected-failures list, prints one
// line per unexpected failure and per expected failure that now passes,
// then "conformance: N passed, N failed, N skipped". Exits 1 when a test
// failed that is not on the list, when a listed test passed (so the list
// stays true), or when nothing ran.
// Usage: node summarize.mjs RESULTS_JSON EXPECTED_FAILURES_FILE
import { readFileSync } from "node:fs"

const [resultsPath, expectedPath] = process.argv.slice(2)
const results = JSON.parse(readFileSync(resultsPath, "utf8"))
const expected = new Map()
for (const raw of readFileSync(expectedPath, "utf8").split("\n")) {
  const line = raw.trim()
  if (!line || line.startsWith("#")) continue
  const sep = line.indexOf(" :: ")
  if (sep < 0) {
    console.log(`expected-failures: malformed line (want "feature :: test name"): ${line}`)
    process.exit(1)
  }
  expected.set(line.slice(sep + 4), line.slice(0, sep))
}

let passed = 0, failed = 0, skipped = 0
const unexpected = [], nowPassing = [], seen = new Set()
for (const file of results.testResults) {
  for (const t of file.assertionResults) {
    const name = t.fullName
    seen.add(name)
    if (t.status === "passed") {
      passed++
      if (expected.has(name)) nowPassing.push(name)
    } else if (t.status === "failed") {
      failed++
      if (!expected.has(name)) unexpected.push(name)
    } else {
      skipped++
    }
  }
}
for (const name of unexpected) console.log(`UNEXPECTED FAILURE: ${name}`)
for (const name of nowPassing) console.log(`NOW PASSING (remove from expected-failures): ${name}`)
const stale = [...expected.keys()].filter((n) => !seen.has(n))
for (const name of stale) console.log(`NOT IN THE SUITE (remove from expected-failures): ${name}`)
const byFeature = new Map()
for (const [name, feature] of expected) if (seen.has(name) && !nowPassing.includes(name)) byFeature.set(feature, (byFeature.get(feature) ?? 0) + 1)
for (const [feature, n] of byFeature) console.log(`expected failure (${feature}): ${n}`)
console.log(`unexpected failures: ${unexpected.length}, expected failures now passing: ${nowPassing.length}`)
console.log(`conformance: ${passed} passed, ${failed} failed, ${skipped} skipped`)
process.exit(unexpected.length === 0 && nowPassing.length === 0 && stale.length === 0 && passed > 0 ? 0 : 1)
