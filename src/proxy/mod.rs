//! The stdio proxy: spawns the server and relays frames both ways through the Program.
