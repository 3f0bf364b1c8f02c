// Tool schemas and the teaching text the model reads. Kept short: it is paid
// for on every request (docs/EDGES.md #15).
import { Type } from "typebox";

export const recallParams = Type.Object({
	code: Type.Optional(Type.String({ description: "One fold code (as hints name it)." })),
	codes: Type.Optional(
		Type.Array(Type.String(), {
			description: "Fold codes from {#<code> FOLDED} tags in your context (bare code or the whole tag). Omit when using `search`.",
		}),
	),
	grep: Type.Optional(Type.String({ description: "Return only lines containing this text (case-insensitive)." })),
	lines: Type.Optional(Type.String({ description: 'Return only a line range, 1-based inclusive, e.g. "40-80".' })),
	chars: Type.Optional(
		Type.String({
			description:
				'Return characters of the block verbatim, 1-based inclusive (UTF-16 units), e.g. "1-7200"; 7200 at most per read. For lines too long to read whole.',
		}),
	),
	search: Type.Optional(
		Type.String({ description: "Find WHICH folded blocks hold this text: one bounded sweep over every folded block, hits grouped by code." }),
	),
});

export const unfoldParams = Type.Object({
	codes: Type.Array(Type.String(), { description: "Fold codes from {#<code> FOLDED} tags (bare code or the whole tag)." }),
});

export const RECALL = {
	name: "recall_folded",
	label: "Recall folded context",
	description:
		"Read back the exact original of a block shown as {#<code> FOLDED} (an older tool result or thinking that was folded to a short digest; its error lines stay visible in the digest). Bounded: whole reads are capped; slice with grep=<term>, lines=<a-b> or chars=<a-b>; search=<term> without codes finds which folded block holds a term. Read-only: blocks stay folded. If a narrower command or a file read gets the detail more cheaply, do that instead.",
	promptSnippet: "read back the exact original of a {#code FOLDED} block (bounded; grep/lines/search).",
	promptGuidelines: [
		"A {#code FOLDED} tag marks an older tool result or thinking folded to a digest to save context; the full bytes are kept. recall_folded is a fallback: use it only when the current step needs a detail the digest hides.",
		"To find which folded block holds a known identifier, call recall_folded search=<term>, then slice with grep=<term> or lines=<a-b>.",
	],
} as const;

export const UNFOLD = {
	name: "unfold",
	label: "Unfold context",
	description:
		"Restore folded blocks ({#<code> FOLDED}) to their full content in your context from the next request on, for good. Costs their full size on every later request: prefer recall_folded for a one-time read.",
	promptSnippet: "permanently restore {#code FOLDED} blocks to full content.",
	promptGuidelines: ["Unfold only a block your ongoing work keeps needing; it is never folded again and costs its full size every request."],
} as const;
