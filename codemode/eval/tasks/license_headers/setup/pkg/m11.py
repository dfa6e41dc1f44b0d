# SPDX-License-Identifier: MIT
import os

NAME_11 = 'm11'
