// A push-to-pull bridge: the scheduler pushes events, a consumer iterates them. Closing the
// iterator early (break / return) calls `onCancel`, which is how a consumer cancels generation.
export class EventChannel<T> implements AsyncIterable<T> {
  private buffer: T[] = [];
  private waiting: ((r: IteratorResult<T>) => void) | null = null;
  private failWaiting: ((e: unknown) => void) | null = null;
  private ended = false;
  private error: unknown = null;

  constructor(private readonly onCancel: () => void) {}

  push(value: T) {
    if (this.ended) return;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = this.failWaiting = null;
      w({ value, done: false });
    } else this.buffer.push(value);
  }

  end(error?: unknown) {
    if (this.ended) return;
    this.ended = true;
    if (error !== undefined) this.error = error;
    if (this.waiting) {
      const w = this.waiting;
      const f = this.failWaiting!;
      this.waiting = this.failWaiting = null;
      if (error !== undefined) f(error);
      else w({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.buffer.length > 0) return Promise.resolve({ value: this.buffer.shift()!, done: false });
        if (this.ended)
          return this.error !== null ? Promise.reject(this.error) : Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          this.waiting = resolve;
          this.failWaiting = reject;
        });
      },
      return: () => {
        if (!this.ended) {
          this.ended = true;
          this.buffer = [];
          this.onCancel();
        }
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
