"""The actors of one session: the feed releases ticks, the engine actor fires the armed plan,
the agent actor calls the agent, and the driver runs the schedule of ordinals across them."""
