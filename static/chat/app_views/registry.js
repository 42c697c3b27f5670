/* Every live app view on the page (inline rows and modals). */


export const liveAppViews = [];
let hostRequestSeq = 0;

/** An id for a request the host itself sends to a view (ui/resource-teardown). */
export function nextHostRequestId() {
  hostRequestSeq += 1;
  return "atrium-host:" + hostRequestSeq;
}

export function viewForContainer(container) {
  for (let i = 0; i < liveAppViews.length; i++) if (liveAppViews[i].container === container) return liveAppViews[i];
  return null;
}

export function forCall(id, fn) {
  liveAppViews.slice().forEach(function (v) {
    if (v.id === id && !v.closed) fn(v);
  });
}
