import { ErrorCode, SluiceError } from "../errors.ts";

/** A stopping queue takes no new run: 429, so a client retries on another node or later. */
export function stopping(): SluiceError {
  return new SluiceError(ErrorCode.TOO_MANY, ["the service is stopping"]);
}
