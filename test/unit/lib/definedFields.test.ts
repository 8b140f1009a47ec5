import { describe, expect, expectTypeOf, it } from "vitest";
import { definedFields } from "../../../src/lib/definedFields";

describe("definedFields", () => {
  it("drops the keys whose value is undefined and keeps the others in their order", () => {
    const fields = definedFields({ a: 1, b: undefined as string | undefined, c: "x" });
    expect(fields).toStrictEqual({ a: 1, c: "x" });
    expect(Object.keys(fields)).toEqual(["a", "c"]);
    expect("b" in fields).toBe(false);
  });

  it("keeps falsy values that are not undefined", () => {
    expect(definedFields({ empty: "", zero: 0, no: false, nothing: null })).toStrictEqual({ empty: "", zero: 0, no: false, nothing: null });
  });

  it("types a possibly undefined value as an optional key without undefined", () => {
    const maybe = (n: number): string | undefined => (n > 0 ? "set" : undefined);
    const fields = definedFields({ always: 1, sometimes: maybe(1) });
    expectTypeOf(fields).toEqualTypeOf<{ always: number } & { sometimes?: string }>();
    // What exactOptionalPropertyTypes asks of an optional field: assignable, where { sometimes: maybe(1) } is not.
    const target: { always: number; sometimes?: string } = fields;
    expect(target).toStrictEqual({ always: 1, sometimes: "set" });
  });

  it("makes an optional key of the input optional in the result", () => {
    const input: { a?: number; b: string } = { b: "x" };
    expectTypeOf(definedFields(input)).toEqualTypeOf<{ b: string } & { a?: number }>();
  });
});
