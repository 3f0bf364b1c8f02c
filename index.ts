// The package's Pi entry point. It lives at the package root because Pi
// names an extension after its path: an index.ts at the root is listed
// under the package's own name (pi-context-fold), where extension/index.ts
// would be listed as "…:extension".
export { default } from "./extension/index.ts";
