// Summarises V8 CPU profiles (.cpuprofile, as --cpu-prof or the bench's
// --node-profile writes them): self time per function across all files,
// with its share of the total, like `go tool pprof -top`.
//
//   node extension/bench/cpuprofile-top.ts [-n 25] FILE...
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
let top = 25;
const files: string[] = [];
for (let i = 0; i < args.length; i++) {
	if (args[i] === "-n") top = Number(args[++i]);
	else files.push(args[i]);
}
const self = new Map<string, number>();
let total = 0;
for (const f of files) {
	const prof = JSON.parse(readFileSync(f, "utf8"));
	const byId = new Map<number, any>();
	for (const n of prof.nodes) byId.set(n.id, n);
	const dt: number[] = prof.timeDeltas ?? [];
	prof.samples.forEach((id: number, i: number) => {
		const n = byId.get(id);
		const cf = n.callFrame;
		const url = String(cf.url ?? "").replace(/^.*\//, "");
		const key = `${cf.functionName || "(anonymous)"} ${url}${url ? `:${cf.lineNumber + 1}` : ""}`;
		const t = (dt[i + 1] ?? dt[i] ?? 0) / 1000; // ms until the next sample
		self.set(key, (self.get(key) ?? 0) + t);
		total += t;
	});
}
const rows = [...self].sort((a, b) => b[1] - a[1]).slice(0, top);
console.log(`${files.length} ${files.length === 1 ? "profile" : "profiles"}, ${total.toFixed(1)} ms sampled`);
console.log("   self ms   flat%  function");
for (const [k, t] of rows) console.log(`${t.toFixed(1).padStart(10)} ${((100 * t) / total).toFixed(1).padStart(6)}%  ${k}`);
