/**
 * Kubernetes quantities as numbers, so a DVM's resources can be compared with each other (requests
 * within limits) and with the operator's maximum. "500m" is 0.5, "512Mi" is 536870912; the unit of the
 * result is the quantity's own (cores, bytes).
 */

/**
 * A quantity as the transfer pods' resources take it: "500m", "2", "1.5", "512Mi", "1G". Narrower than
 * Kubernetes' own grammar (no exponents, no sign); the CRD has the same pattern.
 */
export const QUANTITY_PATTERN = /^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/;

const MULTIPLIERS: Record<string, number> = {
  "": 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** The quantity's value, or undefined when it does not match QUANTITY_PATTERN. */
export function quantityValue(text: string): number | undefined {
  if (!QUANTITY_PATTERN.test(text)) return undefined;
  const match = /^([0-9.]+)(.*)$/.exec(text)!;
  return Number(match[1]) * (MULTIPLIERS[match[2] ?? ""] ?? Number.NaN);
}
