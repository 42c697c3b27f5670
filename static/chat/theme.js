/*
 * Atrium theme & page shell.
 *
 * Loaded synchronously in <head> so the theme is resolved before first paint.
 * - Theme preference: "system" (default, follows the OS), "light" or "dark", persisted in
 *   localStorage under "atrium-theme". <html data-theme> always holds the resolved theme
 *   ("light" | "dark"); <html data-theme-pref> the preference.
 * - Fires `atrium:themechange` on document ({detail: {theme, preference}}) so other
 *   scripts (e.g. the view host) can forward the theme to app views.
 * - Shell behaviour shared by every page: the mobile sidebar toggle and closing
 *   <details data-menu> popovers on outside click / Escape.
 */
(function () {
  "use strict";

  const KEY = "atrium-theme";
  const PREFS = ["system", "light", "dark"];
  const root = document.documentElement;
  const media = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  function readPreference() {
    try {
      const value = window.localStorage.getItem(KEY);
      return PREFS.indexOf(value) >= 0 ? value : "system";
    } catch (e) {
      return "system";
    }
  }

  function resolve(pref) {
    if (pref === "light" || pref === "dark") return pref;
    return media && media.matches ? "dark" : "light";
  }

  function syncControls(pref, theme) {
    const buttons = document.querySelectorAll("[data-theme-set]");
    for (let i = 0; i < buttons.length; i++) {
      buttons[i].setAttribute("aria-pressed", String(buttons[i].getAttribute("data-theme-set") === pref));
    }
    const toggles = document.querySelectorAll("[data-theme-toggle]");
    for (let j = 0; j < toggles.length; j++) {
      const label = theme === "dark" ? "Switch to light mode" : "Switch to dark mode";
      toggles[j].setAttribute("aria-label", label);
      toggles[j].setAttribute("title", label);
    }
  }

  function apply(pref) {
    const theme = resolve(pref);
    const changed = root.getAttribute("data-theme") !== theme;
    if (changed) {
      root.classList.add("theme-switching");
      window.requestAnimationFrame(function () {
        window.requestAnimationFrame(function () {
          root.classList.remove("theme-switching");
        });
      });
    }
    root.setAttribute("data-theme", theme);
    root.setAttribute("data-theme-pref", pref);
    syncControls(pref, theme);
    if (changed) {
      document.dispatchEvent(
        new CustomEvent("atrium:themechange", { detail: { theme: theme, preference: pref } })
      );
    }
  }

  function setPreference(pref) {
    if (PREFS.indexOf(pref) < 0) pref = "system";
    try {
      if (pref === "system") window.localStorage.removeItem(KEY);
      else window.localStorage.setItem(KEY, pref);
    } catch (e) {
      /* storage denied: the choice lasts for this page only */
    }
    apply(pref);
  }

  apply(readPreference());

  if (media) {
    const onSystemChange = function () {
      if (readPreference() === "system") apply("system");
    };
    if (media.addEventListener) media.addEventListener("change", onSystemChange);
    else if (media.addListener) media.addListener(onSystemChange);
  }
  window.addEventListener("storage", function (event) {
    if (event.key === KEY) apply(readPreference());
  });

  // ---- shell -----------------------------------------------------------------------

  function setSidebar(open) {
    const app = document.querySelector("[data-app]");
    if (!app) return;
    app.classList.toggle("sidebar-open", open);
    const toggles = document.querySelectorAll("[data-sidebar-toggle]");
    for (let i = 0; i < toggles.length; i++) {
      toggles[i].setAttribute("aria-expanded", String(open));
    }
    if (open) {
      const first = document.querySelector("#sidebar a, #sidebar summary");
      if (first) first.focus();
    }
  }

  function closeMenus(except) {
    const open = document.querySelectorAll("details[data-menu][open]");
    for (let i = 0; i < open.length; i++) {
      if (open[i] !== except && !open[i].contains(except)) open[i].removeAttribute("open");
    }
  }

  document.addEventListener("click", function (event) {
    const target = event.target;
    if (!(target instanceof Element)) return;
    const set = target.closest("[data-theme-set]");
    if (set) {
      setPreference(set.getAttribute("data-theme-set"));
      return;
    }
    if (target.closest("[data-theme-toggle]")) {
      setPreference(root.getAttribute("data-theme") === "dark" ? "light" : "dark");
      return;
    }
    if (target.closest("[data-sidebar-toggle]")) {
      const app = document.querySelector("[data-app]");
      setSidebar(!(app && app.classList.contains("sidebar-open")));
      return;
    }
    if (target.closest("[data-sidebar-close]")) {
      setSidebar(false);
      return;
    }
    closeMenus(target.closest("details[data-menu]"));
  });

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    const open = document.querySelector("details[data-menu][open]");
    if (open) {
      open.removeAttribute("open");
      const summary = open.querySelector("summary");
      if (summary) summary.focus();
      return;
    }
    const app = document.querySelector("[data-app].sidebar-open");
    if (app) setSidebar(false);
  });

  // Opening one menu closes the others; an opened new-thread form focuses its input.
  document.addEventListener(
    "toggle",
    function (event) {
      const details = event.target;
      if (!(details instanceof HTMLDetailsElement) || !details.hasAttribute("data-menu")) return;
      if (!details.open) return;
      closeMenus(details);
      const input = details.querySelector("input:not([type=hidden])");
      if (input) input.focus();
    },
    true
  );

  // <time data-relative datetime="…"> → "just now", "5 minutes ago", … (kept fresh).
  const rtf = typeof Intl.RelativeTimeFormat === "function" ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;
  function relative(date) {
    const seconds = Math.round((date.getTime() - Date.now()) / 1000);
    const abs = Math.abs(seconds);
    if (abs < 45) return "just now";
    const units = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400], ["hour", 3600], ["minute", 60]];
    for (let i = 0; i < units.length; i++) {
      if (abs >= units[i][1] || units[i][0] === "minute") {
        const value = Math.round(seconds / units[i][1]);
        return rtf ? rtf.format(value, units[i][0]) : Math.abs(value) + " " + units[i][0] + (Math.abs(value) === 1 ? "" : "s") + " ago";
      }
    }
    return "";
  }
  function refreshRelativeTimes() {
    const nodes = document.querySelectorAll("time[data-relative]");
    for (let i = 0; i < nodes.length; i++) {
      const date = new Date(nodes[i].getAttribute("datetime"));
      if (!isNaN(date.getTime())) nodes[i].textContent = relative(date);
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    syncControls(readPreference(), root.getAttribute("data-theme"));
    refreshRelativeTimes();
    window.setInterval(refreshRelativeTimes, 60000);
  });

  window.AtriumTheme = {
    /** The resolved theme: "light" or "dark". */
    get: function () {
      return root.getAttribute("data-theme");
    },
    /** The stored preference: "system", "light" or "dark". */
    preference: readPreference,
    set: setPreference,
  };
})();
