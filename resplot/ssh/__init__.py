"""SSH as OpenSSH users know it, without Qt: config resolution exactly as `ssh -G` (config,
openssh_config, openssh_tokens), host keys (hostkeys), logins and prompts (auth, prompts),
ProxyCommand (proxy) and the connection with its keepalives and reconnects (connection)."""
