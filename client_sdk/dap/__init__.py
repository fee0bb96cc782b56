"""DAP (draft-ietf-ppm-dap-18): the device's side and the messages every party shares.

``hpke`` seals and opens with RFC 9180's X25519/HKDF-SHA256/AES-128-GCM suite. See docs/dap.md.
"""
