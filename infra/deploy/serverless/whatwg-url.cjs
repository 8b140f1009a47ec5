/**
 * Stand-in for `whatwg-url` in the Lambda bundle. Its only importer, node-fetch 2 (under
 * @kubernetes/client-node), uses it as a fallback: `const URL = Url.URL || whatwgUrl.URL`, and Node's
 * `url.URL` always exists. The real package drags in ~280 kB of Unicode tables (tr46).
 */
"use strict";
module.exports = { URL: globalThis.URL, URLSearchParams: globalThis.URLSearchParams };
