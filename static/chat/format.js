/* Dates, sizes, durations and names as the timeline shows them (the browser's locale). */

const timeFmt = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" });
const fullFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "short" });
const dayFmt = new Intl.DateTimeFormat(undefined, { weekday: "long", month: "long", day: "numeric" });
const dayYearFmt = new Intl.DateTimeFormat(undefined, { month: "long", day: "numeric", year: "numeric" });
const rtf = typeof Intl.RelativeTimeFormat === "function" ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;

export function toDate(iso) {
  const d = iso instanceof Date ? iso : new Date(iso);
  return isNaN(d.getTime()) ? null : d;
}
export function formatTime(iso) {
  const d = toDate(iso);
  return d ? timeFmt.format(d) : "";
}
export function formatFull(iso) {
  const d = toDate(iso);
  return d ? fullFmt.format(d) : "";
}
export function dayKey(iso) {
  const d = toDate(iso);
  return d ? d.getFullYear() + "-" + d.getMonth() + "-" + d.getDate() : "";
}
export function formatDay(iso) {
  const d = toDate(iso);
  if (!d) return "";
  const today = new Date();
  const yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1);
  if (dayKey(d) === dayKey(today)) return "Today";
  if (dayKey(d) === dayKey(yesterday)) return "Yesterday";
  return (d.getFullYear() === today.getFullYear() ? dayFmt : dayYearFmt).format(d);
}
export function formatRelative(iso) {
  const d = toDate(iso);
  if (!d) return "";
  const seconds = Math.round((d.getTime() - Date.now()) / 1000);
  const abs = Math.abs(seconds);
  const units = [
    ["day", 86400],
    ["hour", 3600],
    ["minute", 60],
    ["second", 1],
  ];
  for (let i = 0; i < units.length; i++) {
    if (abs >= units[i][1] || units[i][0] === "second") {
      const value = Math.round(seconds / units[i][1]);
      return rtf ? rtf.format(value, units[i][0]) : value + " " + units[i][0] + "s";
    }
  }
  return "";
}
export function formatBytes(n) {
  if (typeof n !== "number" || !isFinite(n) || n < 0) return "";
  if (n < 1024) return n + " B";
  const units = ["KB", "MB", "GB", "TB"];
  let value = n;
  let i = -1;
  do {
    value /= 1024;
    i++;
  } while (value >= 1024 && i < units.length - 1);
  return (value >= 10 ? Math.round(value) : value.toFixed(1)) + " " + units[i];
}
export function formatLatency(ms) {
  if (typeof ms !== "number" || !isFinite(ms)) return "";
  if (ms < 1) return "<1 ms";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s";
  return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
}
export function formatDuration(seconds) {
  if (typeof seconds !== "number" || !isFinite(seconds)) return "";
  const m = Math.floor(seconds / 60);
  const s = Math.round(seconds % 60);
  return m + ":" + (s < 10 ? "0" : "") + s;
}
export function initials(name) {
  const words = String(name || "?")
    .trim()
    .split(/[\s._-]+/)
    .filter(Boolean);
  if (!words.length) return "?";
  const first = Array.from(words[0])[0] || "?";
  const second = words.length > 1 ? Array.from(words[words.length - 1])[0] || "" : "";
  return (first + second).toUpperCase();
}
export function strHash(s) {
  let n = 5381;
  for (let i = 0; i < s.length; i++) n = ((n * 33) ^ s.charCodeAt(i)) >>> 0;
  return n.toString(36) + "-" + s.length;
}
export function hueClass(key) {
  let n;
  if (typeof key === "number") n = key;
  else {
    n = 0;
    const s = String(key || "");
    for (let i = 0; i < s.length; i++) n = (n * 31 + s.charCodeAt(i)) >>> 0;
  }
  return "hue-" + (Math.abs(n) % 10);
}
