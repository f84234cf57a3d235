import { type TSchema, Type } from "typebox";

/** RespGenericModel: every envelope answer, success or failure (docs/errors.md). */
export const Envelope = <T extends TSchema>(data: T) =>
  Type.Object({
    status: Type.Boolean(),
    code: Type.Union([Type.Integer(), Type.Null()]),
    message: Type.Union([Type.String(), Type.Null()]),
    data: Type.Union([data, Type.Null()]),
  });

export const AnyEnvelope = Envelope(Type.Unknown());

export interface EnvelopeBody<T> {
  status: boolean;
  code: number | null;
  message: string | null;
  data: T | null;
}

export function ok<T>(data: T): EnvelopeBody<T> {
  return { status: true, code: 0, message: "success", data };
}

/**
 * The success envelope around data that is JSON text already (a stored result): spliced in
 * rather than parsed and serialised again. Must equal `JSON.stringify(ok(JSON.parse(json)))`.
 */
export function okJson(json: string | null): string {
  return `{"status":true,"code":0,"message":"success","data":${json ?? "null"}}`;
}

export function fail(code: number, message: string): EnvelopeBody<null> {
  return { status: false, code, message, data: null };
}
