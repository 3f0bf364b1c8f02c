// The engine client: runs the Go engine (`contextfold serve`) as one
// long-lived child process and speaks its length-prefixed JSON protocol
// (see internal/pi/protocol). Modelled on esbuild's service: the child is
// unref'd while no request is pending, so it never keeps Node alive, and it
// exits by itself when its stdin closes.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { PROTOCOL_VERSION } from "./locate.js";

export { PROTOCOL_VERSION };

export type RequestHandler = (method: string, params: any) => any | Promise<any>;

export class EngineError extends Error {
	readonly code: string;
	constructor(message: string, code: string) {
		super(message);
		this.code = code;
	}
}

interface Pending {
	resolve(v: any): void;
	reject(e: Error): void;
	timer?: ReturnType<typeof setTimeout>;
}

/** Encodes one frame: 4-byte little-endian length, then the JSON body. */
export function encodeFrame(json: string): Buffer {
	const n = Buffer.byteLength(json, "utf8");
	const out = Buffer.allocUnsafe(4 + n);
	out.writeUInt32LE(n, 0);
	out.write(json, 4, "utf8");
	return out;
}

/**
 * Accumulates stdout chunks and yields complete frame bodies. Chunks are
 * joined only once a whole frame is present, so a multi-megabyte frame
 * arriving in 64 KB pieces is copied once, not once per piece.
 */
export class FrameReader {
	private chunks: Buffer[] = [];
	private size = 0;
	private need = 4; // bytes required before the next parse attempt

	push(chunk: Buffer): string[] {
		this.chunks.push(chunk);
		this.size += chunk.length;
		if (this.size < this.need) return [];
		const out: string[] = [];
		let buf = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.size);
		let off = 0;
		this.need = 4;
		while (buf.length - off >= 4) {
			const n = buf.readUInt32LE(off);
			if (buf.length - off - 4 < n) {
				this.need = 4 + n;
				break;
			}
			out.push(buf.toString("utf8", off + 4, off + 4 + n));
			off += 4 + n;
		}
		buf = buf.subarray(off);
		this.chunks = buf.length ? [buf] : [];
		this.size = buf.length;
		return out;
	}
}

export interface EngineOptions {
	bin: string;
	args?: string[];
	env?: NodeJS.ProcessEnv;
	/** Serves requests the engine makes of the adapter (e.g. "persist"). */
	onRequest: RequestHandler;
	/** Called once when the child exits or the protocol breaks. */
	onExit?: (reason: string) => void;
	onStderr?: (text: string) => void;
	/** How long to wait for the engine's hello before killing it. */
	helloTimeoutMs?: number;
	/**
	 * Judges the engine's hello (null: no hello frame): a reason refuses the
	 * engine and kills it. The default accepts this protocol version only.
	 */
	accept?: (hello: Hello | null) => string | null;
}

/** The engine's first frame's params. */
export interface Hello {
	protocol?: unknown;
	version?: unknown;
	build?: unknown;
	platform?: unknown;
}

export class Engine {
	private child: ChildProcessWithoutNullStreams;
	private pending = new Map<number, Pending>();
	private nextId = 0;
	private reader = new FrameReader();
	private exited: string | null = null;
	private awaitingHello = true;
	/** Whether the child and its pipes are ref'd (a spawned child starts so). */
	private refd = true;
	readonly ready: Promise<Hello>;
	private readonly opts: EngineOptions;

	constructor(opts: EngineOptions) {
		this.opts = opts;
		this.child = spawn(opts.bin, opts.args ?? ["serve"], { stdio: ["pipe", "pipe", "pipe"], env: opts.env ?? process.env });
		let helloResolve!: (v: any) => void;
		let helloReject!: (e: Error) => void;
		this.ready = new Promise((res, rej) => {
			helloResolve = res;
			helloReject = rej;
		});
		this.ready.catch(() => {});
		const helloTimer = setTimeout(() => {
			helloReject(new EngineError(`engine sent no hello within ${opts.helloTimeoutMs ?? 5000} ms`, "timeout"));
			this.kill();
		}, opts.helloTimeoutMs ?? 5000);
		helloTimer.unref();
		this.ready.then(() => clearTimeout(helloTimer), () => clearTimeout(helloTimer));
		let hello = false;
		this.child.stdout.on("data", (chunk: Buffer) => {
			for (const body of this.reader.push(chunk)) {
				let f: any;
				try {
					f = JSON.parse(body);
				} catch {
					this.fail("engine sent a malformed frame");
					return;
				}
				if (!hello) {
					hello = true;
					const params: Hello | null = f.method === "hello" && f.params && typeof f.params === "object" ? f.params : null;
					const accept = opts.accept ?? ((h: Hello | null) => (h?.protocol === PROTOCOL_VERSION ? null : `engine speaks protocol ${h?.protocol}; this adapter needs protocol ${PROTOCOL_VERSION}`));
					const refused = accept(params);
					if (refused !== null) {
						helloReject(new EngineError(refused, "version"));
						this.kill();
						return;
					}
					this.awaitingHello = false;
					this.updateRef();
					helloResolve(f.params);
					continue;
				}
				this.dispatch(f);
			}
		});
		this.child.stderr.on("data", (chunk: Buffer) => opts.onStderr?.(chunk.toString("utf8")));
		this.child.on("error", (err: NodeJS.ErrnoException) => {
			const why = err.code === "EACCES" ? "permission denied (is it executable?)" : err.code === "ENOENT" ? "no such file" : err.message;
			helloReject(new EngineError(`cannot start engine ${opts.bin}: ${why}`, "spawn"));
			this.fail(`engine failed: ${err.message}`);
		});
		this.child.on("exit", (code, signal) => {
			// An exit status before the hello is the binary's own verdict (wrong
			// file, wrong build); a signal may be anyone's and is retried. The
			// verdict waits for the child's stderr to drain (briefly), so the
			// start's one message can quote what the binary printed.
			const verdict = () => helloReject(new EngineError(`engine ${opts.bin} exited before its hello (${signal ?? `code ${code}`})`, signal ? "signal" : "exit"));
			if (!this.awaitingHello || this.child.stderr.readableEnded) verdict();
			else {
				const t = setTimeout(verdict, 100);
				this.child.stderr.once("end", () => (clearTimeout(t), verdict()));
			}
			this.fail(`engine exited (${signal ?? `code ${code}`})`);
		});
		this.child.stdin.on("error", () => {});
		this.updateRef();
	}

	get alive(): boolean {
		return this.exited === null;
	}

	get pid(): number | undefined {
		return this.child.pid;
	}

	private dispatch(f: any): void {
		if (typeof f.method === "string") {
			void this.serve(f);
			return;
		}
		const p = this.pending.get(f.id);
		if (!p) return;
		this.pending.delete(f.id);
		if (p.timer) clearTimeout(p.timer);
		this.updateRef();
		if (f.error) p.reject(new EngineError(f.error.message, f.error.code));
		else p.resolve(f.result);
	}

	private async serve(f: any): Promise<void> {
		let reply: string;
		try {
			const result = await this.opts.onRequest(f.method, f.params);
			reply = JSON.stringify({ id: f.id, result: result ?? null });
		} catch (e: any) {
			reply = JSON.stringify({ id: f.id, error: { code: "adapter", message: String(e?.message ?? e) } });
		}
		if (f.id !== undefined && this.alive) this.child.stdin.write(encodeFrame(reply));
	}

	/**
	 * Sends a request whose params are already JSON text (so a message delta
	 * is stringified once, not twice) and waits at most timeoutMs.
	 */
	requestRaw(method: string, paramsJSON: string, timeoutMs: number): Promise<any> {
		if (!this.alive) return Promise.reject(new EngineError(this.exited ?? "engine not running", "closed"));
		const id = ++this.nextId;
		return new Promise((resolve, reject) => {
			const p: Pending = { resolve, reject };
			if (timeoutMs > 0) {
				p.timer = setTimeout(() => {
					this.pending.delete(id);
					this.updateRef();
					reject(new EngineError(`engine did not answer ${method} within ${timeoutMs} ms`, "timeout"));
				}, timeoutMs);
			}
			this.pending.set(id, p);
			this.updateRef();
			this.child.stdin.write(encodeFrame(`{"id":${id},"method":${JSON.stringify(method)},"params":${paramsJSON}}`));
		});
	}

	request(method: string, params: unknown, timeoutMs: number): Promise<any> {
		return this.requestRaw(method, JSON.stringify(params ?? null), timeoutMs);
	}

	notify(method: string, params: unknown): void {
		if (this.alive) this.child.stdin.write(encodeFrame(JSON.stringify({ method, params })));
	}

	/** Closes stdin; the engine exits on EOF. */
	close(): void {
		if (!this.alive) return;
		this.child.stdin.end();
		this.updateRef();
	}

	kill(): void {
		try {
			this.child.kill("SIGKILL");
		} catch {}
		this.fail("engine killed");
	}

	private fail(reason: string): void {
		if (this.exited !== null) return;
		this.exited = reason;
		this.awaitingHello = false;
		for (const [id, p] of this.pending) {
			if (p.timer) clearTimeout(p.timer);
			p.reject(new EngineError(reason, "closed"));
			this.pending.delete(id);
		}
		this.updateRef();
		this.opts.onExit?.(reason);
	}

	/** Keep Node alive only while a request is pending (esbuild's rule). */
	private updateRef(): void {
		const busy = (this.pending.size > 0 || this.awaitingHello) && this.alive;
		if (busy === this.refd) return; // eight ref/unref calls a request otherwise
		this.refd = busy;
		const streams = [this.child.stdin, this.child.stdout, this.child.stderr] as any[];
		if (busy) {
			this.child.ref();
			for (const s of streams) s.ref?.();
		} else {
			this.child.unref();
			for (const s of streams) s.unref?.();
		}
	}
}
