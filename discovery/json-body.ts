// Reads a small JSON request body, and refuses an oversized one at once: a declared
// Content-Length above the limit gets 413 before a byte of the body is read, and a body that
// grows past the limit gets 413 as soon as it does. Either way the connection is closed, so
// the rest is never waited for (express's parser reads the whole body off first, so a client
// that declares a huge length and sends nothing held the connection until the timeout).
// Any content type is read as JSON (`curl -d '{...}'` sends form-urlencoded); only
// uncompressed UTF-8 is accepted.
import type { RequestHandler, Response } from 'express';
import { ApiError, sendError } from './api-error.js';

export const BODY_LIMIT_BYTES = 16 * 1024;

export function jsonBody(limitBytes = BODY_LIMIT_BYTES): RequestHandler {
  return (req, res, next) => {
    const declared = req.headers['content-length'];
    if (declared === undefined && req.headers['transfer-encoding'] === undefined) {
      req.body = undefined;
      return next();
    }
    const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
    if (encoding !== 'identity') {
      return next(
        new ApiError(
          415,
          'unsupported_media_type',
          `unsupported content encoding "${encoding}"; send the JSON body uncompressed`,
        ),
      );
    }
    const charset = charsetOf(req.headers['content-type']);
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      return next(
        new ApiError(
          415,
          'unsupported_media_type',
          `unsupported charset "${charset.toUpperCase()}"; send UTF-8`,
        ),
      );
    }
    // Node's parser has already checked that Content-Length is a plain number.
    if (declared !== undefined && Number(declared) > limitBytes) return tooLarge(res, limitBytes);

    const chunks: Buffer[] = [];
    let received = 0;
    let done = false;
    const finish = () => {
      done = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limitBytes) {
        finish();
        return tooLarge(res, limitBytes);
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      finish();
      try {
        req.body = parse(Buffer.concat(chunks).toString('utf8'));
      } catch (err) {
        return next(err);
      }
      next();
    };
    // A client that goes away mid-body, or a body timed out by the server, ends here: there
    // is nobody left to answer.
    const onError = () => finish();
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.once('close', () => {
      if (!done) finish();
    });
  };
}

function tooLarge(res: Response, limitBytes: number): void {
  // Closing is what lets us answer without reading the rest.
  res.setHeader('Connection', 'close');
  sendError(res, 413, 'payload_too_large', `request body exceeds ${limitBytes / 1024}kb`);
}

/** Strict JSON: an object or an array (as express.json's strict mode); empty means no body. */
function parse(text: string): unknown {
  const start = text.search(/\S/);
  if (start === -1) return undefined;
  if (text[start] !== '{' && text[start] !== '[') {
    throw new ApiError(400, 'invalid_json', 'request body is not valid JSON: expected an object');
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ApiError(400, 'invalid_json', `request body is not valid JSON: ${(err as Error).message}`);
  }
}

function charsetOf(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  const match = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(contentType);
  return match === null ? undefined : match[1].toLowerCase();
}
