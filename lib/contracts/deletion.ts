import { z } from "zod";
import { SelectionFilterShape } from "./pipelines";

/** The filters a deletion takes: a selection's, without paging or sampling. */
export const DELETION_FILTERS = [
  "userId",
  "groupId",
  "metadata",
  "createdAfter",
  "createdBefore",
  "search",
  "generation",
  "importId",
] as const;

/**
 * POST /v1/pipelines/:id/delete-samples: every sample matching the filters, or with `"all": true`
 * (and no filter) every sample of the pipeline. Nothing given is a 400: an empty body must never
 * delete a pipeline's samples.
 */
export const DeleteSamplesBody = z
  .strictObject({
    userId: SelectionFilterShape.userId,
    groupId: SelectionFilterShape.groupId,
    metadata: SelectionFilterShape.metadata,
    createdAfter: SelectionFilterShape.createdAfter,
    createdBefore: SelectionFilterShape.createdBefore,
    search: SelectionFilterShape.search,
    generation: SelectionFilterShape.generation,
    importId: SelectionFilterShape.importId,
    all: z.boolean().nullish(),
  })
  .superRefine((b, ctx) => {
    const given = DELETION_FILTERS.filter((k) =>
      k === "metadata" || k === "generation"
        ? b[k] !== undefined && Object.values(b[k]).some((v) => v !== undefined)
        : b[k] !== undefined,
    );
    if (b.all === true && given.length > 0) {
      ctx.addIssue({ code: "custom", path: [given[0]!], message: 'give either filters or "all": true, not both' });
    } else if (b.all !== true && given.length === 0) {
      ctx.addIssue({
        code: "custom",
        path: ["all"],
        message: 'give at least one filter, or "all": true to delete every sample of the pipeline',
      });
    }
  });
export type DeleteSamplesInput = z.infer<typeof DeleteSamplesBody>;

export const DeletedResponse = z.object({ deleted: z.number().int().min(0) });
