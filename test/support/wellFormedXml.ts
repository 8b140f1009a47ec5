/**
 * A small well-formedness check for the XML this project writes (the timeline SVG): one root, tags
 * nested and closed, attributes quoted and unique, no stray "<" or "&". Not a validating parser, and it
 * knows no DTDs or CDATA; enough to catch broken output without a dependency.
 */
export type WellFormedResult = { ok: true; root: string; elements: Map<string, number> } | { ok: false; error: string };

const NAME = "[A-Za-z_:][-A-Za-z0-9_:.]*";
const TOKEN = new RegExp(`<!--[\\s\\S]*?-->|<\\?[\\s\\S]*?\\?>|<(/?)(${NAME})((?:\\s+${NAME}\\s*=\\s*(?:"[^"]*"|'[^']*'))*)\\s*(/?)>|<|[^<]+`, "g");
const ATTRIBUTE = new RegExp(`(${NAME})\\s*=\\s*(?:"([^"]*)"|'([^']*)')`, "g");
const ENTITY = /&(?:amp|lt|gt|quot|apos|#[0-9]+|#x[0-9A-Fa-f]+);/g;

function badText(text: string): string | undefined {
  if (text.includes("<")) return "a '<' that starts no tag";
  if (text.replace(ENTITY, "").includes("&")) return "an '&' that is not an entity";
  return undefined;
}

export function checkWellFormedXml(xml: string): WellFormedResult {
  const stack: string[] = [];
  const elements = new Map<string, number>();
  let root: string | undefined;
  let closedRoot = false;
  for (const match of xml.matchAll(TOKEN)) {
    const [token, slash, name, attributes = "", selfClosing] = match;
    const at = `at offset ${match.index}`;
    if (token.startsWith("<!--") || token.startsWith("<?")) continue;
    if (name === undefined) {
      if (token === "<") return { ok: false, error: `malformed tag ${at}` };
      if (stack.length === 0 && token.trim() !== "") return { ok: false, error: `text outside the root element ${at}` };
      const problem = badText(token);
      if (problem) return { ok: false, error: `${problem} ${at}` };
      continue;
    }
    if (slash) {
      if (attributes.trim() !== "" || selfClosing) return { ok: false, error: `malformed closing tag </${name}> ${at}` };
      const open = stack.pop();
      if (open !== name) return { ok: false, error: `</${name}> closes <${open ?? "nothing"}> ${at}` };
      if (stack.length === 0) closedRoot = true;
      continue;
    }
    if (closedRoot || (stack.length === 0 && root !== undefined)) return { ok: false, error: `a second root element <${name}> ${at}` };
    root ??= name;
    const seen = new Set<string>();
    for (const [, attribute, double, single] of attributes.matchAll(ATTRIBUTE)) {
      if (seen.has(attribute!)) return { ok: false, error: `attribute ${attribute} repeated on <${name}> ${at}` };
      seen.add(attribute!);
      const problem = badText(double ?? single ?? "");
      if (problem) return { ok: false, error: `attribute ${attribute} of <${name}> has ${problem} ${at}` };
    }
    elements.set(name, (elements.get(name) ?? 0) + 1);
    if (!selfClosing) stack.push(name);
    else if (stack.length === 0) closedRoot = true;
  }
  if (root === undefined) return { ok: false, error: "no root element" };
  if (stack.length > 0) return { ok: false, error: `<${stack[stack.length - 1]}> is never closed` };
  return { ok: true, root, elements };
}

/** How many elements carry `className` among their classes (e.g. the timeline's "execution" bars). */
export function countElementsWithClass(xml: string, className: string): number {
  let count = 0;
  for (const [, classes] of xml.matchAll(/\sclass="([^"]*)"/g)) if (classes!.split(/\s+/).includes(className)) count++;
  return count;
}
