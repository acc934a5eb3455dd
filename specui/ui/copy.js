() => {
  // "Copy reply" under a chat message (specui/ui/render.py, render_copy) puts the reply's plain text on the
  // clipboard, never the message's markup (token spans, rejected drafts), which Gradio's own copy buttons took.
  const put = (text) => {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    const area = document.createElement("textarea");  // plain http on a LAN has no clipboard API
    area.value = text;
    area.style.position = "fixed";
    area.style.left = "-9999px";
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); } finally { area.remove(); }
    return Promise.resolve();
  };
  // "Copy conversation" in the chat's toolbar: every prompt and finished reply, as text, in order
  window.specuiCopyConversation = () => {
    const parts = [...document.querySelectorAll("#chat .specui-prompt, #chat .specui-copy-text")].map((e) =>
      (e.classList.contains("specui-prompt") ? "User: " : "Assistant: ") + e.textContent);
    return put(parts.join("\n\n"));
  };
  document.addEventListener("click", (event) => {
    const button = event.target.closest ? event.target.closest(".specui-copy") : null;
    if (!button) return;
    const text = button.parentElement.querySelector(".specui-copy-text");
    put(text ? text.textContent : "").then(
      () => { button.textContent = "Copied"; setTimeout(() => { button.textContent = "Copy reply"; }, 1500); },
      () => { button.textContent = "Copy failed"; });
  });
}
