// What the adapter does to the messages Pi is about to send: find how much of
// the previous request is unchanged (so only the rest crosses the pipe), and
// apply the engine's substitutions in place. Nothing here decides a fold.

/** One cached layer: the frozen texts of one fold event. */
export interface Layer {
	seq: number;
	trigger?: string;
	entries: { id: string; code: string; text: string }[];
}

/** [message index, part index (-1 = whole tool-result content), layer seq, entry index]. */
export type Placement = [number, number, number, number];

/**
 * The fields the engine reads from a message, captured before substitution.
 * Comparing them with === is exact; V8 compares string contents, which costs
 * memcmp time, not allocation.
 */
type Sig = unknown[];

function signature(m: any): Sig {
	const out: unknown[] = [m?.role, m?.timestamp, m?.responseId, m?.toolCallId, m?.toolName, m?.isError, m?.summary, m?.command, m?.output];
	const c = m?.content;
	if (typeof c === "string") out.push(c);
	else if (Array.isArray(c)) {
		out.push(c.length);
		for (const p of c) out.push(p?.type, p?.text, p?.thinking, p?.id, p?.name, typeof p?.data === "string" ? p.data.length : undefined);
	} else out.push(c === undefined ? undefined : typeof c);
	return out;
}

/** signature(m) compared with sig, field by field, without allocating. */
function same(sig: Sig, m: any): boolean {
	if (sig[0] !== m?.role || sig[1] !== m?.timestamp || sig[2] !== m?.responseId || sig[3] !== m?.toolCallId) return false;
	if (sig[4] !== m?.toolName || sig[5] !== m?.isError || sig[6] !== m?.summary || sig[7] !== m?.command || sig[8] !== m?.output) return false;
	const c = m?.content;
	if (typeof c === "string") return sig.length === 10 && sig[9] === c;
	if (!Array.isArray(c)) return sig.length === 10 && sig[9] === (c === undefined ? undefined : typeof c);
	if (sig[9] !== c.length || sig.length !== 10 + 6 * c.length) return false;
	let i = 10;
	for (const p of c) {
		if (sig[i] !== p?.type || sig[i + 1] !== p?.text || sig[i + 2] !== p?.thinking || sig[i + 3] !== p?.id || sig[i + 4] !== p?.name) return false;
		if (sig[i + 5] !== (typeof p?.data === "string" ? p.data.length : undefined)) return false;
		i += 6;
	}
	return true;
}

/**
 * Tracks the message list the engine holds. prefix() returns how many
 * leading messages are unchanged since the last commit(); a compaction, a
 * /tree jump, a context_edit or another extension's rewrite shows up as an
 * earlier difference and the engine resynchronises from there.
 *
 * Known blind spot: a change to a tool call's arguments alone is not seen
 * (they can be large and are never folded).
 */
export class Tracker {
	private sigs: Sig[] = [];

	prefix(msgs: readonly unknown[]): number {
		const n = Math.min(this.sigs.length, msgs.length);
		for (let i = 0; i < n; i++) if (!same(this.sigs[i], msgs[i])) return i;
		return n;
	}

	/** Records msgs (before any substitution) as what the engine now holds. */
	commit(msgs: readonly unknown[], from: number): void {
		this.sigs.length = from;
		for (let i = from; i < msgs.length; i++) this.sigs.push(signature(msgs[i]));
	}

	reset(): void {
		this.sigs = [];
	}

	get length(): number {
		return this.sigs.length;
	}
}

/** Serialises a turn's params with each appended message stringified once. */
export function turnParams(msgs: readonly unknown[], keep: number, extra: Record<string, unknown>): string {
	const parts: string[] = [];
	for (let i = keep; i < msgs.length; i++) parts.push(JSON.stringify(msgs[i]));
	let head = `{"keep":${keep}`;
	for (const [k, v] of Object.entries(extra)) if (v !== undefined) head += `,${JSON.stringify(k)}:${JSON.stringify(v)}`;
	return `${head},"append":[${parts.join(",")}]}`;
}

/**
 * Applies placements to msgs in place. A tool result's whole content becomes
 * one text part; an assistant part keeps every field but its text or
 * thinking, and a thinking part loses its thinkingSignature. The result
 * serialises byte-identically to the engine's own apply (internal/apply).
 * Returns how many substitutions applied.
 */
export function applyPlacements(msgs: any[], placements: readonly Placement[], layers: ReadonlyMap<number, Layer>, below = Infinity): number {
	let n = 0;
	for (const [mi, pi, seq, ei] of placements) {
		if (mi >= below) continue;
		const m = msgs[mi];
		const text = layers.get(seq)?.entries[ei]?.text;
		if (!m || typeof text !== "string") continue;
		if (pi < 0) {
			if (m.role !== "toolResult") continue;
			m.content = [{ type: "text", text }];
			n++;
			continue;
		}
		const parts = m.content;
		if (!Array.isArray(parts)) continue;
		const part = parts[pi];
		if (part?.type === "thinking") {
			// A signature binds the exact text it was minted for: a folded
			// thinking part goes out unsigned, which Pi sends as text.
			const { thinkingSignature: _, ...rest } = part;
			parts[pi] = { ...rest, thinking: text };
		}
		else if (part?.type === "text") parts[pi] = { ...part, text };
		else continue;
		n++;
	}
	return n;
}
