#!/bin/sh
# A toy agent CLI. It reads one prompt line "<path> <word>", asks before each tool call by
# printing a JSON line and reading "allow" or "deny" from standard input, reports each model
# call's usage, and ends with a final line. It acts only on "allow".
IFS= read -r prompt || exit 1
path=${prompt%% *}
word=${prompt#* }
printf '{"type":"usage","input":100,"output":10}\n'
printf '{"type":"call","tool":"Write","path":"%s","content":"%s"}\n' "$path" "$word"
IFS= read -r answer || exit 1
if [ "$answer" = allow ]; then printf '%s\n' "$word" > "$path"; result="wrote $path"; else result="refused"; fi
printf '{"type":"usage","input":150,"output":12}\n'
printf '{"type":"call","tool":"Bash","command":"cat %s"}\n' "$path"
IFS= read -r answer || exit 1
if [ "$answer" = allow ]; then out=$(cat -- "$path" 2>&1 | tr -d '"\\'); else out="refused"; fi
printf '{"type":"final","text":"%s; %s","total":{"input":300,"output":30}}\n' "$result" "$out"
