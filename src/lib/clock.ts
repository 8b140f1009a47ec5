/** Time comes from here in logic that measures or expires (leases, timings, warnings), so tests control it. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
