// Loaded before context-fold: marks when Pi's session_start and
// context_with_system events reach the extensions (see resume.sh).
export default function (pi: any) {
	pi.on("session_start", () => {
		(globalThis as any).__cfStart = performance.now();
	});
	pi.on("context_with_system", () => {
		(globalThis as any).__cfT0 = performance.now();
	});
}
