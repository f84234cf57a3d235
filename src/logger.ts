import pino, { type Logger } from "pino";

/** One logger for the process; secrets in headers never reach the log. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    redact: {
      paths: [
        "req.headers.token",
        "req.headers.cookie",
        "req.headers.authorization",
        "*.secret",
        "*.password",
      ],
      censor: "[redacted]",
    },
  });
}
