/**
 * Optional fields as exactOptionalPropertyTypes means them: absent, never present with the value
 * undefined. JSON, merge patches and DynamoDB items cannot say "undefined", and a key holding it still
 * counts for Object.keys and `in`; so an object literal whose values may be undefined goes through
 * definedFields instead of one conditional spread per field.
 */

/** Keys of T that may be missing or hold undefined. */
type MaybeAbsentKeys<T> = { [K in keyof T]-?: undefined extends T[K] ? K : Partial<Pick<T, K>> extends Pick<T, K> ? K : never }[keyof T];

/** T with every key that may hold undefined made optional and never undefined. */
export type DefinedFields<T> = {
  [K in keyof T as K extends MaybeAbsentKeys<T> ? never : K]: T[K];
} & {
  [K in keyof T as K extends MaybeAbsentKeys<T> ? K : never]?: Exclude<T[K], undefined>;
};

/**
 * `fields` without its undefined-valued keys, the others in their order. Only undefined is dropped:
 * "", 0, false and null stay.
 */
export function definedFields<T extends object>(fields: T): DefinedFields<T> {
  const defined: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) defined[key] = value;
  return defined as DefinedFields<T>;
}
