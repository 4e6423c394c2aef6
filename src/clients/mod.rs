//! MCP client configuration files: discovery, wrapping and unwrapping.
