// The route handler that takes a book turn (book-turns.ts) for the rest of a request: after
// the guard and the body (the token and the cost are known), before the route's book calls;
// the turn ends when the answer is written or the client goes away, whichever comes first.
import type { Request, RequestHandler, Response } from 'express';
import { sendError } from './api-error.js';
import type { BookTurns } from './book-turns.js';

export function bookTurn(
  turns: BookTurns,
  owner: (res: Response) => string,
  onRefused: (token: string) => void,
  cost: (req: Request) => number = () => 1,
): RequestHandler {
  return (req, res, next) => {
    const who = owner(res);
    const turn = turns.enter(who, cost(req));
    if (turn === 'book_queue_full') {
      onRefused(who);
      res.setHeader('Retry-After', '1');
      sendError(
        res,
        429,
        'book_queue_full',
        `token '${who}' has ${turns.limits.queuedPerToken} requests waiting for the lease book (its bound); retry after 1 s`,
      );
      return;
    }
    res.once('finish', turn.leave);
    res.once('close', turn.leave);
    turn.ready.then(() => {
      // A client gone while it waited: nothing to answer, and its turn is already given back.
      if (res.destroyed) return;
      next();
    }, next);
  };
}
