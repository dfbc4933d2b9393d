/** The request header through which proxy.ts tells the dashboard's layout the page asked for. */
export const REQUEST_PATH_HEADER = "x-lmp-request-path";
