#!/bin/sh
# A toy agent CLI speaking JSON-RPC 2.0 on its standard streams. It reads the prompt as a
# "turn/start" request, asks "tool/approve" before each call and acts only when the result
# says {"approved":true}, reports each model call with a "usage" notification and answers the
# turn with the result of "turn/start".
IFS= read -r start || exit 1
ask() {
  printf '{"jsonrpc":"2.0","id":%s,"method":"tool/approve","params":%s}\n' "$1" "$2"
  IFS= read -r answer || exit 1
  case "$answer" in *'"approved":true'*) return 0 ;; esac
  return 1
}
printf '{"jsonrpc":"2.0","method":"usage","params":{"prompt":120,"completion":8}}\n'
if ask 1 '{"tool":"run","argv":"ls"}'; then listing=$(ls | tr '\n' ' '); else listing=refused; fi
printf '{"jsonrpc":"2.0","method":"usage","params":{"prompt":140,"completion":9}}\n'
if ask 2 '{"tool":"save","file":".env","text":"KEY=1"}'; then echo KEY=1 > .env; saved=yes; else saved=no; fi
printf '{"jsonrpc":"2.0","id":0,"result":{"text":"files: %s saved: %s","usage":{"prompt":260,"completion":17}}}\n' "$listing" "$saved"
