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

/**
 * Serialises a turn's params with each appended message stringified once.
 * With file (see fileRefs), message keep+i whose file[i] is an entry id is
 * not sent: the engine reads its bytes from the session file.
 */
export function turnParams(msgs: readonly unknown[], keep: number, extra: Record<string, unknown>, file?: FileRefs): string {
	const parts: string[] = [];
	const refs = file?.ids ?? [];
	for (let i = keep; i < msgs.length; i++) if (refs[i - keep] == null) parts.push(JSON.stringify(msgs[i]));
	let head = `{"keep":${keep}`;
	for (const [k, v] of Object.entries(extra)) if (v !== undefined) head += `,${JSON.stringify(k)}:${JSON.stringify(v)}`;
	if (file) head += `,"fileVersion":${JSON.stringify(file.version)},"file":${JSON.stringify(refs)}`;
	return `${head},"append":[${parts.join(",")}]}`;
}

/** Messages the engine can read from the session file: entry ids (null: sent inline) and the file's format version. */
export interface FileRefs {
	ids: (string | null)[];
	version: unknown;
}

/** The part of Pi's SessionProjection that fileRefs reads. */
type Projection = { entries: { sourceEntry: any; messages: unknown[] }[] };

/** What fileRefs needs of Pi's session manager (ReadonlySessionManager). */
interface Projecting {
	getSessionFile(): string | undefined;
	getHeader?(): { version?: unknown } | null;
	buildSessionProjection?(): Projection;
}

/**
 * Which of msgs are, value for value, message entries of Pi's session file,
 * paired by position with Pi's own projection of the session (the context
 * it builds from the file): msgs[i] gets the id of the entry whose message
 * is projectedMessages[i] unchanged, when sameJSON(msgs[i], it); null where
 * not (a rewritten or added message, one not yet in the file). A message
 * entry's bytes in the file are JSON.stringify of that message, so the
 * engine reads exactly what turnParams would have sent. Null when nothing
 * is to be gained (no file, no projection, nothing matches).
 */
export function fileRefs(sm: Projecting, msgs: readonly unknown[], projection?: Projection): FileRefs | null {
	let proj: Projection | undefined;
	let version: unknown;
	try {
		if (!sm.getSessionFile() || !sm.buildSessionProjection) return null;
		version = sm.getHeader?.()?.version;
		proj = projection ?? sm.buildSessionProjection();
	} catch {
		return null;
	}
	if (typeof version !== "number" || !Array.isArray(proj?.entries)) return null;
	const ids: (string | null)[] = [];
	let hits = 0;
	for (const pe of proj.entries) {
		const src = pe.sourceEntry;
		const whole = src?.type === "message" && typeof src.id === "string" && pe.messages.length === 1 && pe.messages[0] === src.message;
		for (const pm of pe.messages) {
			const i = ids.length;
			if (i >= msgs.length) break;
			const hit = whole && sameJSON(msgs[i], pm);
			ids.push(hit ? src.id : null);
			if (hit) hits++;
		}
	}
	while (ids.length > 0 && ids[ids.length - 1] === null) ids.pop();
	return hits > 0 ? { ids, version } : null;
}

/**
 * Whether JSON.stringify(a) === JSON.stringify(b), for plain JSON data:
 * the same keys in the same order and equal values, recursively. Anything
 * JSON.stringify treats specially (undefined, functions, toJSON, class
 * instances, non-finite numbers) compares unequal unless identical, so a
 * true answer is always right.
 */
export function sameJSON(a: unknown, b: unknown): boolean {
	if (a === b) {
		const t = typeof a;
		return t === "string" || t === "boolean" || t === "object" || t === "undefined" || (t === "number" && Number.isFinite(a));
	}
	if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
	if (Array.isArray(a)) {
		if (!Array.isArray(b) || a.length !== b.length) return false;
		for (let i = 0; i < a.length; i++) if (!sameJSON(a[i], b[i])) return false;
		return true;
	}
	if (Array.isArray(b)) return false;
	const pa = Object.getPrototypeOf(a);
	const pb = Object.getPrototypeOf(b);
	if ((pa !== Object.prototype && pa !== null) || (pb !== Object.prototype && pb !== null)) return false;
	const ka = Object.keys(a);
	const kb = Object.keys(b);
	if (ka.length !== kb.length) return false;
	for (let i = 0; i < ka.length; i++) {
		const k = ka[i];
		if (k !== kb[i] || k === "toJSON") return false;
		const va = (a as any)[k];
		if (va === undefined || typeof va === "function" || !sameJSON(va, (b as any)[k])) return false;
	}
	return true;
}

/**
 * Applies placements to msgs in place. A tool result's whole content becomes
 * one text part; an assistant part keeps every field but its text or
 * thinking, and a thinking part loses its thinkingSignature. The result
 * serialises byte-identically to the engine's own apply (internal/core/apply).
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

/** The tool-call id as Pi's Anthropic provider may rewrite it (normalizeToolCallId). */
function anthropicId(id: string): string {
	return id.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64);
}

/**
 * Marks the end of the frozen region with a cache breakpoint in an Anthropic
 * Messages payload: the tool_result answering call `id` gets the same
 * cache_control as Pi's own breakpoints. Anthropic reads its cache only at
 * breakpoints (and up to 20 blocks before one); Pi marks the system prompt,
 * the last tool and the last message, so a fold event further back would
 * re-write the whole conversation. With this mark it re-writes only what
 * follows the frozen region. Returns whether the payload changed: nothing
 * happens for another wire format, when Pi sends no breakpoints (caching
 * off), or when the block is not found. Anthropic takes at most four: when
 * Pi's three and another extension's fill them, the tools' breakpoint gives
 * way if the system prompt has one (its prefix holds the tools); otherwise
 * the payload is left alone.
 */
export function markAnchor(payload: unknown, id: string): boolean {
	const p = payload as any;
	if (!id || !p || typeof p !== "object" || !Array.isArray(p.messages)) return false;
	const want = anthropicId(id);
	let marks = 0;
	let template: unknown = undefined;
	let target: any = null;
	const seen = (b: any): void => {
		if (b && typeof b === "object" && b.cache_control) {
			marks++;
			template = b.cache_control;
		}
	};
	const tools: any[] = Array.isArray(p.tools) ? p.tools : [];
	const system: any[] = Array.isArray(p.system) ? p.system : [];
	tools.forEach(seen);
	system.forEach(seen);
	for (const m of p.messages) {
		if (!Array.isArray(m?.content)) continue;
		for (const b of m.content) {
			seen(b);
			if (Array.isArray(b?.content)) b.content.forEach(seen);
			if (b?.type === "tool_result" && (b.tool_use_id === id || b.tool_use_id === want)) target = b;
		}
	}
	if (template === undefined || !target || target.cache_control) return false;
	if (marks >= 4) {
		const tool = tools.find((t) => t?.cache_control);
		if (!tool || !system.some((b) => b?.cache_control)) return false;
		delete tool.cache_control;
	}
	target.cache_control = JSON.parse(JSON.stringify(template));
	return true;
}
