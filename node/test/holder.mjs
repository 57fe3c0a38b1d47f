// A process that holds a store and shares it (`Store.open(dir, { share: true })`) until its
// stdin closes or it is told to stop: the served store of the tests. It prints "ready" once
// the store is served, and exits 0 after closing it. Its second argument, when given, holds
// more options of `Store.open` as JSON.
import { Store } from "../dist/index.js";

const dir = process.argv[2];
// More options of `Store.open`, as JSON (`replicateTo`, say).
const options = JSON.parse(process.argv[3] ?? "{}");
const store = await Store.open(dir, { ...options, share: true });
process.stdout.write("ready\n");
let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await store.close();
  process.exit(0);
}
process.stdin.on("end", stop);
process.stdin.on("close", stop);
process.stdin.resume();
process.on("SIGTERM", stop);
