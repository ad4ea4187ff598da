#!/bin/sh
# A fake Claude Code CLI for the adapter's failure modes. It speaks the stream-json control
# protocol as the scenario in /workspace/.fake/scenario says, writes each answer it gets to
# /workspace/.fake/answers, acts on a tool call only when the answer is an allow, and beats a
# heartbeat counter into /workspace/.fake/beat while any of its processes lives.
dir=/workspace/.fake
scenario=$(cat "$dir/scenario")
( n=0; while :; do n=$((n + 1)); echo "$n" > "$dir/beat"; sleep 0.2; done ) &
IFS= read -r init || exit 1
IFS= read -r prompt || exit 1
say() { printf '%s\n' "$1"; }
ask() {
  say "{\"type\":\"control_request\",\"request_id\":\"$1\",\"request\":$2}"
  IFS= read -r answer || exit 1
  printf '%s\n' "$answer" >> "$dir/answers"
}
allowed() {
  case "$answer" in
    *'"behavior":"allow"'* | *'"permissionDecision":"allow"'*) return 0 ;;
  esac
  return 1
}
result() {
  say '{"type":"result","subtype":"success","is_error":false,"result":"'"$1"'","session_id":"0b1d2c3e-0000-4000-8000-000000000000","usage":{"input_tokens":10,"output_tokens":2}}'
}
write_call() {
  printf '{"subtype":"can_use_tool","tool_name":"Write","input":{"file_path":"%s","content":"x"}}' "$1"
}
say '{"type":"control_response","response":{"subtype":"success","request_id":"auto-swe-initialize","response":{}}}'
say '{"type":"system","subtype":"init","session_id":"0b1d2c3e-0000-4000-8000-000000000000","tools":["Bash"]}'
case "$scenario" in
  malformed) say 'this is not json'; sleep 300 ;;
  unknown-event) say '{"type":"telepathy","payload":1}'; sleep 300 ;;
  unknown-subtype)
    ask r1 '{"subtype":"rewrite_history","to":"anything"}'
    result done ;;
  outside)
    ask r1 "$(write_call /workspace/outside.txt)"
    if allowed; then echo x > /workspace/outside.txt; fi
    ask r2 '{"subtype":"hook_callback","callback_id":"auto-swe-pre-tool-use","input":{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"/workspace/target-repo/../escape.txt","content":"x"}}}'
    if allowed; then echo x > /workspace/escape.txt; fi
    ask r3 '{"subtype":"can_use_tool","tool_name":"WebFetch","input":{"url":"http://x.example"}}'
    ask r4 '{"subtype":"can_use_tool","tool_name":"Bash"}'
    ask r5 "$(write_call /workspace/target-repo/ok.txt)"
    if allowed; then echo x > /workspace/target-repo/ok.txt; fi
    result done ;;
  hang) sleep 300 ;;
  exit)
    say '{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":5,"output_tokens":1}}}'
    exit 3 ;;
  late)
    sleep 2
    ask r1 "$(write_call /workspace/target-repo/late.txt)"
    if allowed; then echo x > /workspace/target-repo/late.txt; fi
    result done ;;
  many)
    i=0
    while [ "$i" -lt "${MANY:-300}" ]; do
      i=$((i + 1))
      ask "r$i" '{"subtype":"hook_callback","callback_id":"auto-swe-pre-tool-use","input":{"hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/workspace/target-repo/notes.txt"}}}'
    done
    result done ;;
esac
