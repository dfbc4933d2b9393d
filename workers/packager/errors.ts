/** A failure whose message is safe to show the user as the dataset's `error`. */
export class PackagingError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PackagingError";
  }
}

/** This worker no longer holds the job (taken over after an expired lease, or deleted). */
export class LeaseLost extends Error {
  constructor() {
    super("lease lost");
    this.name = "LeaseLost";
  }
}
