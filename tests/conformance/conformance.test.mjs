// The Durable Streams server conformance suite, pointed at the server
// whose base URL `run` passes in CONFORMANCE_TEST_URL.
import { runConformanceTests } from "@durable-streams/server-conformance-tests"
const baseUrl = process.env.CONFORMANCE_TEST_URL
if (!baseUrl) throw new Error("set CONFORMANCE_TEST_URL")
runConformanceTests({ baseUrl, longPollTimeoutMs: 500 })
