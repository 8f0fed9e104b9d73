"""Entities: linking (link/), relatedness (the knowledge bases), passage selection (select/) and the builders of their resources (builders/)."""
